"""The deploy files as data: Kubernetes resources, the compose file, the Dockerfile, and lookups on them."""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import AliasChoices

from gateway.config.settings import Settings
from tests.deploy.dockerfile import Dockerfile, parse_dockerfile

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
EXAMPLE_CONFIG = DEPLOY / "gateway.example.yaml"
SECRET_TEMPLATE = K8S / "secret.example.yaml"
COMPOSE = DEPLOY / "compose.yaml"
DOCKERFILE = DEPLOY / "Dockerfile"

_CONFIG_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")
_CPU = re.compile(r"^(\d+(?:\.\d+)?)(m?)$")

Resource = dict[str, Any]


def load_documents(path: Path) -> list[Resource]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc is not None]


def manifest_paths() -> list[Path]:
    return sorted(path for path in K8S.glob("*.yaml") if path.name != "kustomization.yaml")


def k8s_resources() -> list[Resource]:
    """Every resource under deploy/k8s, the Secret template included."""
    return [doc for path in manifest_paths() for doc in load_documents(path)]


def only(resources: list[Resource], kind: str) -> Resource:
    found = [doc for doc in resources if doc.get("kind") == kind]
    assert len(found) == 1, f"expected one {kind} in deploy/k8s, found {len(found)}"
    return found[0]


def load_compose() -> Resource:
    documents = load_documents(COMPOSE)
    assert len(documents) == 1
    return documents[0]


def load_dockerfile() -> Dockerfile:
    return parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))


def project_version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as file:
        version: str = tomllib.load(file)["project"]["version"]
    return version


def selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """A label selector (matchLabels) selects an object with ``labels`` when every pair is among them."""
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


def container(deployment: Resource, name: str) -> Resource:
    for item in deployment["spec"]["template"]["spec"]["containers"]:
        if item["name"] == name:
            found: Resource = item
            return found
    raise KeyError(name)


def env_entries(item: Resource) -> dict[str, Resource]:
    return {entry["name"]: entry for entry in item.get("env", [])}


def container_port(item: Resource, port: int | str) -> int:
    """A probe's or Service's port: a number, or the name of one of the container's ports."""
    if isinstance(port, int):
        return port
    for declared in item.get("ports", []):
        if declared.get("name") == port:
            number: int = declared["containerPort"]
            return number
    raise KeyError(f"container {item['name']} declares no port named {port!r}")


def cpu_cores(quantity: str | int | float) -> float:
    """A Kubernetes CPU quantity ("2", "500m", 1.5) in cores."""
    match = _CPU.fullmatch(str(quantity))
    assert match is not None, f"not a CPU quantity: {quantity!r}"
    value = float(match.group(1))
    return value / 1000 if match.group(2) else value


def resource_field_value(item: Resource, ref: Resource) -> str:
    """What the kubelet puts in an env var with ``valueFrom.resourceFieldRef`` (rounded up)."""
    resource = ref["resource"]
    section, _, name = resource.partition(".")
    assert name == "cpu", f"only CPU resource fields are modelled here, not {resource}"
    amount = cpu_cores(item["resources"][section]["cpu"])
    divisor = cpu_cores(ref.get("divisor", "1"))
    return str(math.ceil(amount / divisor))


def strings(value: Any) -> list[str]:
    """Every string in parsed YAML, keys included (comments are not data, so never interpolated)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in (*strings(key), *strings(item))]
    if isinstance(value, list):
        return [text for item in value for text in strings(item)]
    return []


def config_variables(text: str) -> dict[str, str | None]:
    """The ``${VAR}`` references of a config file: name -> default (None when it has none)."""
    return {
        match.group(1): match.group(2)
        for value in strings(yaml.safe_load(text))
        for match in _CONFIG_VARIABLE.finditer(value)
    }


def needed_variables(text: str) -> set[str]:
    """Variables the config cannot do without: no default, or an empty one (an empty key or URL)."""
    return {name for name, default in config_variables(text).items() if not default}


def settings_variables() -> set[str]:
    """The environment variables ``Settings`` reads: ``GATEWAY_<FIELD>``, or a field's own aliases (which
    take no prefix)."""
    names = set()
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names |= {choice.upper() for choice in alias.choices if isinstance(choice, str)}
        elif isinstance(alias, str):
            names.add(alias.upper())
        else:
            names.add(f"GATEWAY_{name.upper()}")
    return names


def unread_variables(names: Iterable[str], config_text: str) -> set[str]:
    """Of the environment variables ``names`` a deploy file sets, those the gateway never reads: neither a
    setting nor a ``${VAR}`` of the config file the container loads."""
    return set(names) - settings_variables() - set(config_variables(config_text))


def config_with_model(text: str, name: str) -> str:
    """The config text with one more model (on the first provider), as ops would add it."""
    provider = next(iter(yaml.safe_load(text)["providers"]))
    assert "\nmodels:\n" in text
    entry = f"  {name}:\n    provider: {provider}\n    context_window: 128000\n"
    return text.replace("\nmodels:\n", "\nmodels:\n" + entry, 1)
