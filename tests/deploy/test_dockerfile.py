"""deploy/Dockerfile, read as data (no Docker engine here): stages, user, health check, ports, context."""

from __future__ import annotations

import re
import shlex
import tomllib

from tests.deploy.dockerfile import Dockerfile, Instruction
from tests.deploy.dockerignore import in_context, parse_dockerignore
from tests.deploy.manifests import DOCKERFILE, EXAMPLE_CONFIG, ROOT, unread_variables

VENV = "/opt/gateway"
CONFIG_PATH = "/etc/gateway/gateway.yaml"
BUILD_TOOLS = {
    "build-essential",
    "gcc",
    "g++",
    "cc",
    "clang",
    "make",
    "cargo",
    "rustc",
    "python3-dev",
    "libc6-dev",
    "pkg-config",
}


def words(instruction: Instruction) -> list[str]:
    return [word for word in re.split(r"[\s;&|()]+", instruction.arguments) if word]


def test_dockerfile_is_multi_stage_and_copies_only_the_venv_into_the_final_stage(
    dockerfile: Dockerfile,
) -> None:
    assert len(dockerfile.stages) >= 2
    builder_names = {stage.name for stage in dockerfile.stages[:-1]}
    copies_from = [item for item in dockerfile.final.all("COPY") if "from" in item.flags]
    assert copies_from, "the final stage copies nothing from a build stage"
    for item in copies_from:
        assert item.flags["from"] in builder_names
        assert shlex.split(item.arguments) == [VENV, VENV], f"line {item.line}: copy the venv, nothing else"
    builder = dockerfile.stage(copies_from[0].flags["from"])
    assert any(f"venv {VENV}" in item.arguments for item in builder.all("RUN")), "the builder makes no venv"


def test_dockerfile_final_base_is_python_slim_meeting_requires_python(dockerfile: Dockerfile) -> None:
    match = re.fullmatch(r"python:3\.(\d+)-slim(?:-\w+)?", dockerfile.final.base)
    assert match is not None, dockerfile.final.base
    with (ROOT / "pyproject.toml").open("rb") as file:
        requires = tomllib.load(file)["project"]["requires-python"]
    minimum = re.fullmatch(r">=\s*3\.(\d+)", requires)
    assert minimum is not None
    assert int(match.group(1)) >= int(minimum.group(1))
    # The venv's interpreter is a symlink into the base image: both stages must share it.
    assert {stage.base for stage in dockerfile.stages} == {dockerfile.final.base}


def test_dockerfile_final_stage_has_no_build_tools(dockerfile: Dockerfile) -> None:
    for item in dockerfile.final.all("RUN"):
        found = BUILD_TOOLS & set(words(item))
        assert not found, f"line {item.line} puts build tools in the final image: {sorted(found)}"
        assert "pip" not in item.arguments, f"line {item.line}: install into the venv in the builder"


def test_dockerfile_builder_installs_the_project_non_editable(dockerfile: Dockerfile) -> None:
    installs = [
        item for stage in dockerfile.stages for item in stage.all("RUN") if "pip install" in item.arguments
    ]
    project = [
        item for item in installs if re.search(r"pip install (?:--no-deps )?\.(?:\s|$)", item.arguments)
    ]
    assert project, "no stage installs the project itself"
    # Importing the app at build time turns a dependency missing from pyproject.toml into a build error.
    assert any("import gateway.edge.app" in item.arguments for item in project)
    for item in installs:
        # An editable install points the venv at /src, which the final stage does not have.
        assert not {"-e", "--editable"} & set(words(item)), f"line {item.line}"


def test_dockerfile_runs_as_a_numeric_non_root_user_it_creates(dockerfile: Dockerfile) -> None:
    user = dockerfile.final.last("USER")
    assert user is not None, "the final stage runs as root"
    uid, _, gid = user.arguments.partition(":")
    assert uid.isdigit() and int(uid) != 0, "USER must be numeric (runAsNonRoot checks it) and not 0"
    assert not gid or (gid.isdigit() and int(gid) != 0)
    assert any(f"--uid {uid}" in item.arguments for item in dockerfile.final.all("RUN"))
    assert dockerfile.final.instructions.index(user) > max(
        dockerfile.final.instructions.index(item) for item in dockerfile.final.all("RUN")
    ), "a RUN after USER would not run as root, and nothing should need to"


def test_dockerfile_healthcheck_asks_healthz_with_python(dockerfile: Dockerfile) -> None:
    command = dockerfile.healthcheck()
    assert command is not None, "no HEALTHCHECK, or its CMD is not a valid JSON array (exec form)"
    assert command[:2] == ["python", "-c"]
    code = command[2]
    assert "/healthz" in code and "urllib.request" in code
    check = dockerfile.final.last("HEALTHCHECK")
    assert check is not None
    limit = re.fullmatch(r"(\d+)s", check.flags["timeout"])
    inner = re.search(r"timeout=(\d+(?:\.\d+)?)", code)
    assert limit is not None and inner is not None
    assert float(inner.group(1)) < int(limit.group(1)), "the request must time out before Docker gives up"


def test_dockerfile_says_podman_and_buildah_keep_the_healthcheck_only_in_dockers_format(
    dockerfile: Dockerfile,
) -> None:
    """Their default OCI format has no HEALTHCHECK and they drop it with a warning: where the build is
    documented (the Dockerfile's own header and the container how-to), the build command carries
    ``--format docker``."""
    assert dockerfile.final.last("HEALTHCHECK") is not None
    header = DOCKERFILE.read_text(encoding="utf-8").split("\nARG ", 1)[0]
    howto = (ROOT / "docs" / "how-to" / "docker.md").read_text(encoding="utf-8")
    for where, text in (("deploy/Dockerfile", header), ("docs/how-to/docker.md", howto)):
        builds = re.findall(r"(?:podman|buildah) build[^\n`]*", text)
        assert builds, f"{where} says nothing of building with podman or buildah"
        assert all("--format docker" in build for build in builds), (where, builds)


def test_dockerfile_listens_on_all_interfaces_on_the_exposed_port(dockerfile: Dockerfile) -> None:
    env = dockerfile.final.env()
    expose = dockerfile.final.last("EXPOSE")
    assert expose is not None
    assert expose.arguments.split("/")[0] == env["GATEWAY_PORT"] == "8080"
    assert env["GATEWAY_HOST"] == "0.0.0.0"
    assert env["PATH"].startswith(f"{VENV}/bin:")


def test_dockerfile_ships_the_example_config_where_gateway_config_points(dockerfile: Dockerfile) -> None:
    env = dockerfile.final.env()
    assert env["GATEWAY_CONFIG"] == CONFIG_PATH
    copies = [
        shlex.split(item.arguments) for item in dockerfile.final.all("COPY") if "from" not in item.flags
    ]
    assert ["deploy/gateway.example.yaml", CONFIG_PATH] in copies


def test_dockerfile_data_dir_belongs_to_the_user(dockerfile: Dockerfile) -> None:
    data_dir = dockerfile.final.env()["GATEWAY_DATA_DIR"]
    assert data_dir.startswith("/") and data_dir != "/"
    owned = [
        item
        for item in dockerfile.final.all("RUN")
        if re.search(rf"chown \S+ {re.escape(data_dir)}\b", item.arguments)
    ]
    assert owned, f"{data_dir} must be writable by the unprivileged user"


def test_dockerfile_entrypoint_is_the_gateway_console_script(dockerfile: Dockerfile) -> None:
    entrypoint, cmd = dockerfile.final.last("ENTRYPOINT"), dockerfile.final.last("CMD")
    assert entrypoint is not None and cmd is not None
    assert entrypoint.exec_form() == ["gateway"]
    assert cmd.exec_form() == ["serve"]
    with (ROOT / "pyproject.toml").open("rb") as file:
        assert "gateway" in tomllib.load(file)["project"]["scripts"]


def test_dockerfile_copy_sources_exist_and_are_in_the_build_context(dockerfile: Dockerfile) -> None:
    rules = parse_dockerignore((ROOT / ".dockerignore").read_text(encoding="utf-8"))
    sources = [
        source
        for stage in dockerfile.stages
        for item in stage.all("COPY")
        if "from" not in item.flags
        for source in shlex.split(item.arguments)[:-1]
    ]
    assert sources
    for source in sources:
        path = ROOT / source
        assert path.exists(), f"COPY {source}: no such file in the repository"
        assert in_context(rules, source), f"COPY {source}: .dockerignore leaves it out of the context"
        if path.is_dir():
            modules = [
                p.relative_to(ROOT).as_posix() for p in path.rglob("*.py") if "__pycache__" not in p.parts
            ]
            assert modules and all(in_context(rules, module) for module in modules), source


def test_dockerfile_sets_only_variables_the_gateway_or_python_reads(dockerfile: Dockerfile) -> None:
    names = set(dockerfile.final.env()) - {"PATH", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"}
    assert unread_variables(names, EXAMPLE_CONFIG.read_text(encoding="utf-8")) == set()
