"""How the Kubernetes resources refer to one another: selectors, targets, the ConfigMap and the Secret."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

import pytest
import yaml

from gateway.config.loading import parse_config
from tests.deploy.manifests import (
    EXAMPLE_CONFIG,
    Resource,
    container_port,
    env_entries,
    needed_variables,
    only,
    selects,
    unread_variables,
)

PLACEHOLDER = re.compile(r"<[^<>]+>")


def pod_labels(deployment: Resource) -> dict[str, str]:
    labels: dict[str, str] = deployment["spec"]["template"]["metadata"]["labels"]
    return labels


def config_volume(pod_spec: Resource, gateway_container: Resource) -> tuple[Resource, Resource, str]:
    """The mount that holds GATEWAY_CONFIG, its volume, and the file's name inside it."""
    config_path = env_entries(gateway_container)["GATEWAY_CONFIG"]["value"]
    directory, filename = posixpath.split(config_path)
    mounts = [mount for mount in gateway_container["volumeMounts"] if mount["mountPath"] == directory]
    assert len(mounts) == 1, f"nothing is mounted at {directory}, where GATEWAY_CONFIG points"
    volumes = {volume["name"]: volume for volume in pod_spec["volumes"]}
    return mounts[0], volumes[mounts[0]["name"]], filename


def test_k8s_deployment_selector_selects_its_own_pods(deployment: Resource) -> None:
    assert selects(deployment["spec"]["selector"]["matchLabels"], pod_labels(deployment))


def test_k8s_service_selects_the_pods_and_targets_the_gateway_port(
    resources: list[Resource], deployment: Resource, gateway_container: Resource
) -> None:
    service = only(resources, "Service")
    assert selects(service["spec"]["selector"], pod_labels(deployment))
    (port,) = service["spec"]["ports"]
    assert container_port(gateway_container, port["targetPort"]) == 8080


def test_k8s_autoscaler_targets_the_deployment_on_cpu(
    resources: list[Resource], deployment: Resource
) -> None:
    hpa = only(resources, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["apiVersion"], target["kind"], target["name"]) == (
        deployment["apiVersion"],
        deployment["kind"],
        deployment["metadata"]["name"],
    )
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "Resource" and metric["resource"]["name"] == "cpu"
    assert 0 < metric["resource"]["target"]["averageUtilization"] < 100
    assert 2 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]


def test_k8s_disruption_budget_covers_the_pods_and_lets_drains_proceed(
    resources: list[Resource], deployment: Resource
) -> None:
    pdb = only(resources, "PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"
    assert selects(pdb["spec"]["selector"]["matchLabels"], pod_labels(deployment))
    min_replicas = only(resources, "HorizontalPodAutoscaler")["spec"]["minReplicas"]
    if "maxUnavailable" in pdb["spec"]:
        assert 1 <= pdb["spec"]["maxUnavailable"] < min_replicas
    else:
        assert 1 <= pdb["spec"]["minAvailable"] < min_replicas


def test_k8s_configmap_key_is_mounted_where_gateway_config_points(
    pod_spec: Resource, gateway_container: Resource, configmap: Resource
) -> None:
    mount, volume, filename = config_volume(pod_spec, gateway_container)
    assert "subPath" not in mount, "a subPath mount never sees ConfigMap updates, so hot reload would stop"
    assert mount.get("readOnly") is True
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    items = {item["path"]: item["key"] for item in volume["configMap"].get("items", [])}
    key = items.get(filename, filename)
    assert key in configmap["data"]


def test_k8s_configmap_config_equals_the_example(configmap: Resource) -> None:
    env = {"OPENAI_API_KEY": "sk-upstream", "DEFAULT_TENANT_KEY": "sk-tenant", "OPENAI_BASE_URL": ""}
    embedded = parse_config(configmap["data"]["gateway.yaml"], Path("configmap/gateway.yaml"), env)
    example = parse_config(EXAMPLE_CONFIG.read_text(encoding="utf-8"), EXAMPLE_CONFIG, env)
    assert embedded == example
    assert embedded.models and embedded.tenants


def key_paths(data: object, prefix: tuple[object, ...] = ()) -> set[tuple[object, ...]]:
    """Every key of a YAML document as a path (list items by position)."""
    found: set[tuple[object, ...]] = set()
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        found |= {(*prefix, key), *key_paths(value, (*prefix, key))}
    return found


def test_k8s_configmap_writes_every_key_the_example_writes(configmap: Resource) -> None:
    """Equal configs can differ in what they write down: a key left at its default parses the same, but an
    operator reading the ConfigMap no longer sees it there to change (``limits.shadow_calls``,
    ``experiments``)."""
    embedded = key_paths(yaml.safe_load(configmap["data"]["gateway.yaml"]))
    example = key_paths(yaml.safe_load(EXAMPLE_CONFIG.read_text(encoding="utf-8")))
    assert sorted(map(str, example - embedded)) == []
    assert sorted(map(str, embedded - example)) == []


def test_key_paths_see_a_key_at_its_default() -> None:
    written = key_paths({"limits": {"max_body_bytes": 1, "shadow_calls": 16}, "experiments": {}})
    assert written == {
        ("limits",),
        ("limits", "max_body_bytes"),
        ("limits", "shadow_calls"),
        ("experiments",),
    }


def test_k8s_pods_get_every_variable_the_config_needs(
    configmap: Resource, gateway_container: Resource
) -> None:
    needed = needed_variables(configmap["data"]["gateway.yaml"])
    assert needed
    assert needed <= set(env_entries(gateway_container)), sorted(needed - set(env_entries(gateway_container)))


def test_k8s_every_secret_reference_names_the_secret_template(
    gateway_container: Resource, secret_template: Resource
) -> None:
    references = [
        entry["valueFrom"]["secretKeyRef"]
        for entry in env_entries(gateway_container).values()
        if "secretKeyRef" in entry.get("valueFrom", {})
    ]
    assert references
    keys = set(secret_template["stringData"])
    for reference in references:
        assert reference["name"] == secret_template["metadata"]["name"]
        assert reference["key"] in keys
    assert {reference["key"] for reference in references} == keys, "the template has keys nobody reads"


def test_k8s_pods_set_only_variables_the_gateway_reads(
    configmap: Resource, gateway_container: Resource
) -> None:
    """A variable neither the settings nor the config read does nothing: a misspelt or retired name, or a
    setting that was never wired up, would pass silently."""
    names = set(env_entries(gateway_container))
    assert {"GATEWAY_REDIS_URL", "GATEWAY_REDIS_CLUSTER"} <= names
    assert unread_variables(names, configmap["data"]["gateway.yaml"]) == set()


def test_unread_variables_are_caught(configmap: Resource) -> None:
    misspelt = {"GATEWAY_REDIS_CLUSTERS", "OPENAI_APIKEY", "GATEWAY_METRICS_DIR"}  # the last: read unprefixed
    assert unread_variables(
        {*misspelt, "GATEWAY_PORT", "OPENAI_API_KEY"}, configmap["data"]["gateway.yaml"]
    ) == (misspelt)


@pytest.mark.parametrize(
    "name", ["GATEWAY_REDIS_URL", "GATEWAY_ADMIN_KEY", "OPENAI_API_KEY", "DEFAULT_TENANT_KEY"]
)
def test_k8s_secrets_come_from_the_secret_never_from_the_manifest(
    gateway_container: Resource, name: str
) -> None:
    entry = env_entries(gateway_container)[name]
    assert "value" not in entry and "secretKeyRef" in entry["valueFrom"]


def test_k8s_secret_template_holds_placeholders_only(secret_template: Resource) -> None:
    assert "data" not in secret_template, "base64 data would hide what is in the template"
    for key, value in secret_template["stringData"].items():
        assert PLACEHOLDER.fullmatch(value), f"{key} must be a <placeholder>, never a real value"


def test_k8s_every_resource_carries_the_app_label(resources: list[Resource], deployment: Resource) -> None:
    name = pod_labels(deployment)["app.kubernetes.io/name"]
    for resource in resources:
        assert resource["metadata"]["labels"]["app.kubernetes.io/name"] == name, resource["kind"]
