"""The deploy files, loaded once per test that asks for them."""

from __future__ import annotations

import pytest

from tests.deploy.dockerfile import Dockerfile
from tests.deploy.manifests import (
    SECRET_TEMPLATE,
    Resource,
    container,
    k8s_resources,
    load_compose,
    load_dockerfile,
    load_documents,
    only,
)


@pytest.fixture
def resources() -> list[Resource]:
    return k8s_resources()


@pytest.fixture
def deployment(resources: list[Resource]) -> Resource:
    return only(resources, "Deployment")


@pytest.fixture
def pod_spec(deployment: Resource) -> Resource:
    spec: Resource = deployment["spec"]["template"]["spec"]
    return spec


@pytest.fixture
def gateway_container(deployment: Resource) -> Resource:
    return container(deployment, "gateway")


@pytest.fixture
def configmap(resources: list[Resource]) -> Resource:
    return only(resources, "ConfigMap")


@pytest.fixture
def secret_template() -> Resource:
    documents = load_documents(SECRET_TEMPLATE)
    assert [doc["kind"] for doc in documents] == ["Secret"]
    return documents[0]


@pytest.fixture
def compose() -> Resource:
    return load_compose()


@pytest.fixture
def dockerfile() -> Dockerfile:
    return load_dockerfile()
