"""deploy/compose.yaml: valid by the Compose Specification's schema, and wired the way the gateway needs."""

from __future__ import annotations

import json
import re
from importlib.resources import files
from typing import Any

import jsonschema
import pytest

from gateway.cli import build_parser
from gateway.redis.version import MINIMUM, parse_version
from tests.deploy.dockerfile import Dockerfile
from tests.deploy.manifests import (
    COMPOSE,
    DEPLOY,
    DOCKERFILE,
    EXAMPLE_CONFIG,
    Resource,
    needed_variables,
    unread_variables,
)

_DURATION = re.compile(r"(?:(\d+)m)?(?:(\d+)s)?")
_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])(.*))?\}")


def compose_schema() -> Any:
    """The Compose Specification's JSON schema, as vendored by the check-jsonschema package (offline)."""
    text = files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json").read_text("utf-8")
    return json.loads(text)


def seconds(duration: str) -> int:
    match = _DURATION.fullmatch(duration)
    assert match is not None and duration, f"not a duration: {duration!r}"
    return int(match.group(1) or 0) * 60 + int(match.group(2) or 0)


def volume_mounts(service: Resource) -> dict[str, tuple[str, str]]:
    """Short-syntax volumes as target -> (source, mode)."""
    mounts = {}
    for entry in service.get("volumes", []):
        source, target, *mode = entry.split(":")
        mounts[target] = (source, mode[0] if mode else "rw")
    return mounts


def test_compose_file_is_valid_by_the_compose_schema(compose: Resource) -> None:
    schema = compose_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = [
        f"{'.'.join(map(str, error.path))}: {error.message}" for error in validator.iter_errors(compose)
    ]
    assert errors == []


def test_compose_schema_check_catches_a_misspelt_key(compose: Resource) -> None:
    schema = compose_schema()
    broken = {**compose, "services": {**compose["services"], "redis": {**compose["services"]["redis"]}}}
    broken["services"]["redis"]["helthcheck"] = broken["services"]["redis"].pop("healthcheck")
    assert list(jsonschema.validators.validator_for(schema)(schema).iter_errors(broken))


def test_compose_runs_the_gateway_and_redis(compose: Resource) -> None:
    assert set(compose["services"]) == {"gateway", "redis", "postgres"}
    assert [name for name, service in compose["services"].items() if "profiles" not in service] == [
        "gateway",
        "redis",
    ]


def test_compose_runs_postgresql_only_for_the_archive(compose: Resource) -> None:
    postgres = compose["services"]["postgres"]
    assert postgres["profiles"] == ["archive"]
    assert "postgres" not in compose["services"]["gateway"].get("depends_on", {})
    assert compose["services"]["gateway"]["environment"]["LEDGER_ARCHIVE_URL"] == "${LEDGER_ARCHIVE_URL:-}"


def test_compose_redis_persists_with_aof_on_a_named_volume(compose: Resource) -> None:
    redis = compose["services"]["redis"]
    command = redis["command"]
    assert command[0] == "redis-server"
    assert command[command.index("--appendonly") + 1] == "yes"
    assert command[command.index("--maxmemory-policy") + 1] == "noeviction"
    source, mode = volume_mounts(redis)["/data"]
    assert mode == "rw"
    assert source in compose["volumes"], "Redis data must live on a named volume"
    assert redis["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    assert "ports" not in redis, "Redis is for the gateway only"


def test_compose_redis_image_meets_the_gateways_minimum_version(compose: Resource) -> None:
    repository, _, tag = compose["services"]["redis"]["image"].partition(":")
    assert repository in {"redis", "valkey/valkey"}, repository
    version = parse_version(tag.split("-")[0])
    assert len(version) >= 2, f"pin a release of at least major.minor, not {tag!r}"
    assert version >= MINIMUM if repository == "redis" else version >= (7, 2)


def test_compose_gateway_waits_for_a_healthy_redis_and_uses_it(compose: Resource) -> None:
    gateway = compose["services"]["gateway"]
    assert gateway["depends_on"]["redis"]["condition"] == "service_healthy"
    url = gateway["environment"]["GATEWAY_REDIS_URL"]
    assert re.fullmatch(r"redis://redis:6379(/\d+)?", url), url


def test_compose_mounts_the_config_read_only_where_gateway_config_points(
    compose: Resource, dockerfile: Dockerfile
) -> None:
    gateway = compose["services"]["gateway"]
    config_path = gateway["environment"].get("GATEWAY_CONFIG", dockerfile.final.env()["GATEWAY_CONFIG"])
    source, mode = volume_mounts(gateway)[config_path]
    assert mode == "ro"
    assert (DEPLOY / source).resolve() == EXAMPLE_CONFIG.resolve()


def test_compose_gateway_data_dir_is_a_named_volume(compose: Resource, dockerfile: Dockerfile) -> None:
    gateway = compose["services"]["gateway"]
    data_dir = gateway["environment"].get("GATEWAY_DATA_DIR", dockerfile.final.env()["GATEWAY_DATA_DIR"])
    source, mode = volume_mounts(gateway)[data_dir]
    assert mode == "rw" and source in compose["volumes"]
    assert gateway["read_only"] is True, "the root filesystem stays read-only; only the volumes are writable"


def test_compose_builds_the_projects_dockerfile_from_the_repository_root(compose: Resource) -> None:
    build = compose["services"]["gateway"]["build"]
    context = (COMPOSE.parent / build["context"]).resolve()
    assert (context / build["dockerfile"]).resolve() == DOCKERFILE.resolve()
    assert (context / ".dockerignore").is_file()


def test_compose_publishes_the_container_port(compose: Resource, dockerfile: Dockerfile) -> None:
    ports = compose["services"]["gateway"]["ports"]
    assert [entry.rsplit(":", 1)[-1] for entry in ports] == [dockerfile.final.env()["GATEWAY_PORT"]]


@pytest.mark.parametrize("name", sorted(needed_variables(EXAMPLE_CONFIG.read_text(encoding="utf-8"))))
def test_compose_passes_every_key_the_config_needs_from_the_host(compose: Resource, name: str) -> None:
    value = compose["services"]["gateway"]["environment"][name]
    match = _INTERPOLATION.fullmatch(value)
    assert match is not None and match.group(1) == name, f"{name} must come from the host: ${{{name}...}}"


def test_compose_sets_only_variables_the_gateway_reads(compose: Resource) -> None:
    names = set(compose["services"]["gateway"]["environment"])
    assert unread_variables(names, EXAMPLE_CONFIG.read_text(encoding="utf-8")) == set()


def test_compose_holds_no_literal_secret(compose: Resource) -> None:
    environment = compose["services"]["gateway"]["environment"]
    for name, value in environment.items():
        if re.search(r"KEY|SECRET|TOKEN|PASSWORD", name):
            assert _INTERPOLATION.fullmatch(str(value)), f"{name} is written in the file"


def test_compose_stop_grace_outlasts_the_graceful_timeout(compose: Resource) -> None:
    graceful = build_parser().parse_args(["serve"]).graceful_timeout
    assert seconds(compose["services"]["gateway"]["stop_grace_period"]) > graceful
