"""Every manifest under deploy/k8s validates, strictly (unknown fields are errors), against the Kubernetes
API's JSON schemas as shipped by the kubernetes-validate package (offline)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes_validate import utils as kubernetes_schema  # type: ignore[import-untyped]

from tests.deploy.manifests import K8S, Resource, load_documents, manifest_paths

KUBERNETES_VERSION = "1.30"
"""the oldest minor version the manifests must work on (HPA autoscaling/v2, PDB policy/v1, sizeLimit)"""


@pytest.mark.parametrize("path", manifest_paths(), ids=lambda path: path.name)
def test_k8s_manifest_validates_against_the_api_schema(path: Path) -> None:
    documents = load_documents(path)
    assert documents
    for document in documents:
        kubernetes_schema.validate(document, KUBERNETES_VERSION, strict=True)


def test_k8s_schema_check_catches_a_misspelt_field(deployment: Resource) -> None:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    with pytest.raises(kubernetes_schema.ValidationError, match="readinesProbe"):
        kubernetes_schema.validate(deployment, KUBERNETES_VERSION, strict=True)


def test_k8s_kustomization_applies_everything_but_the_secret_template() -> None:
    (kustomization,) = load_documents(K8S / "kustomization.yaml")
    listed = set(kustomization["resources"])
    assert listed == {path.name for path in manifest_paths()} - {"secret.example.yaml"}
