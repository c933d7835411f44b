"""deploy/k8s/deployment.yaml: probes, image, security, resources, workers, shutdown, settings."""

from __future__ import annotations

import posixpath

import pytest

from gateway.cli import build_parser
from gateway.config.settings import Settings
from tests.deploy.dockerfile import Dockerfile
from tests.deploy.manifests import (
    K8S,
    Resource,
    container_port,
    cpu_cores,
    env_entries,
    load_documents,
    project_version,
    resource_field_value,
)

IMAGE_REPOSITORY = "llm-cost-gateway"
MEBIBYTES = {"Mi": 1, "Gi": 1024}


def mebibytes(quantity: str) -> int:
    number, unit = quantity[:-2], quantity[-2:]
    assert number.isdigit() and unit in MEBIBYTES, f"write memory as <n>Mi or <n>Gi, not {quantity!r}"
    return int(number) * MEBIBYTES[unit]


def plain_env(item: Resource) -> dict[str, str]:
    return {name: entry["value"] for name, entry in env_entries(item).items() if "value" in entry}


@pytest.mark.parametrize(
    ("probe", "path"),
    [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz"), ("startupProbe", "/healthz")],
)
def test_k8s_probe_asks_the_right_path_on_the_gateway_port(
    gateway_container: Resource, dockerfile: Dockerfile, probe: str, path: str
) -> None:
    check = gateway_container[probe]["httpGet"]
    assert check["path"] == path
    port = container_port(gateway_container, check["port"])
    assert str(port) == plain_env(gateway_container)["GATEWAY_PORT"] == dockerfile.final.env()["GATEWAY_PORT"]


def test_k8s_listens_on_all_interfaces(gateway_container: Resource) -> None:
    assert plain_env(gateway_container)["GATEWAY_HOST"] == "0.0.0.0"


def test_k8s_image_is_the_projects_versioned_image(gateway_container: Resource) -> None:
    version = project_version()
    assert gateway_container["image"] == f"{IMAGE_REPOSITORY}:{version}"
    (kustomization,) = load_documents(K8S / "kustomization.yaml")
    assert kustomization["images"] == [{"name": IMAGE_REPOSITORY, "newTag": version}]


def test_k8s_image_matches_compose(gateway_container: Resource, compose: Resource) -> None:
    assert compose["services"]["gateway"]["image"] == gateway_container["image"]


def test_k8s_runs_as_the_images_non_root_user(
    pod_spec: Resource, gateway_container: Resource, dockerfile: Dockerfile
) -> None:
    pod = pod_spec["securityContext"]
    user = dockerfile.final.last("USER")
    assert user is not None
    assert pod["runAsNonRoot"] is True
    assert f"{pod['runAsUser']}:{pod['runAsGroup']}" == user.arguments
    assert pod["seccompProfile"]["type"] == "RuntimeDefault"
    own = gateway_container["securityContext"]
    assert own["allowPrivilegeEscalation"] is False
    assert own["readOnlyRootFilesystem"] is True
    assert own["capabilities"]["drop"] == ["ALL"]
    assert pod_spec["automountServiceAccountToken"] is False


@pytest.mark.parametrize("setting", ["GATEWAY_DATA_DIR", "/tmp"])
def test_k8s_writable_paths_are_emptydirs(
    pod_spec: Resource, gateway_container: Resource, setting: str
) -> None:
    path = plain_env(gateway_container)[setting] if setting.startswith("GATEWAY_") else setting
    volumes = {volume["name"]: volume for volume in pod_spec["volumes"]}
    mounts = [mount for mount in gateway_container["volumeMounts"] if mount["mountPath"] == path]
    assert len(mounts) == 1, f"{path} is on the read-only root filesystem"
    assert "emptyDir" in volumes[mounts[0]["name"]]
    assert not mounts[0].get("readOnly", False)


def test_k8s_resources_request_and_limit_cpu_and_memory(gateway_container: Resource) -> None:
    requests, limits = gateway_container["resources"]["requests"], gateway_container["resources"]["limits"]
    assert 0 < cpu_cores(requests["cpu"]) <= cpu_cores(limits["cpu"])
    assert 0 < mebibytes(requests["memory"]) <= mebibytes(limits["memory"])
    # Leave each worker at least 256 MiB (docs/how-to/kubernetes.md#memory): they share the vocabularies and
    # the app, but each grows its own heap with the requests and streams it holds.
    workers = int(
        resource_field_value(
            gateway_container,
            env_entries(gateway_container)["GATEWAY_WORKERS"]["valueFrom"]["resourceFieldRef"],
        )
    )
    assert mebibytes(limits["memory"]) >= 256 * workers


def test_k8s_runs_one_worker_per_core_of_the_cpu_limit(gateway_container: Resource) -> None:
    ref = env_entries(gateway_container)["GATEWAY_WORKERS"]["valueFrom"]["resourceFieldRef"]
    assert ref["resource"] == "limits.cpu"
    assert ref["containerName"] == gateway_container["name"]
    workers = int(resource_field_value(gateway_container, ref))
    assert workers == cpu_cores(gateway_container["resources"]["limits"]["cpu"]) >= 1


def test_k8s_args_are_a_serve_command_the_cli_accepts(gateway_container: Resource) -> None:
    assert "command" not in gateway_container, "keep the image's ENTRYPOINT (gateway)"
    args = build_parser().parse_args(gateway_container["args"])
    assert args.command == "serve"


def test_k8s_termination_grace_outlasts_prestop_and_graceful_timeout(
    pod_spec: Resource, gateway_container: Resource
) -> None:
    pre_stop = gateway_container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep" and int(pre_stop[1]) >= 3, "endpoints need a moment to drop the pod"
    graceful = build_parser().parse_args(gateway_container["args"]).graceful_timeout
    assert pod_spec["terminationGracePeriodSeconds"] > int(pre_stop[1]) + graceful


def test_k8s_autoscaler_owns_the_replica_count_and_rollouts_keep_capacity(deployment: Resource) -> None:
    assert "replicas" not in deployment["spec"], "an apply would reset what the autoscaler chose"
    rolling = deployment["spec"]["strategy"]["rollingUpdate"]
    assert rolling["maxUnavailable"] == 0 and rolling["maxSurge"] >= 1


@pytest.mark.parametrize("source", ["deployment", "compose", "dockerfile"])
def test_k8s_and_friends_set_only_real_gateway_settings(
    gateway_container: Resource, compose: Resource, dockerfile: Dockerfile, source: str
) -> None:
    """Settings ignores unknown GATEWAY_* variables, so a misspelt one would pass silently."""
    names = {
        "deployment": set(env_entries(gateway_container)),
        "compose": set(compose["services"]["gateway"]["environment"]),
        "dockerfile": set(dockerfile.final.env()),
    }[source]
    fields = {f"GATEWAY_{name.upper()}" for name in Settings.model_fields}
    settings = {name for name in names if name.startswith("GATEWAY_")}
    assert settings and settings <= fields, sorted(settings - fields)


def test_k8s_plain_settings_validate(gateway_container: Resource) -> None:
    values = {
        name.removeprefix("GATEWAY_").lower(): value
        for name, value in plain_env(gateway_container).items()
        if name.startswith("GATEWAY_")
    }
    settings = Settings.model_validate(values)
    assert settings.port == 8080
    assert posixpath.isabs(str(settings.config)) and posixpath.isabs(str(settings.data_dir))
