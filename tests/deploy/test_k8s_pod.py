"""The pod as the manifests describe it, run as a real ``gateway serve`` process on this machine.

The container's environment is built from the Deployment (Secret references resolved from test values,
``limits.cpu`` turned into the worker count as the kubelet would), the ConfigMap is laid out as the kubelet
writes it, and the container's paths are mapped into a temporary directory. Only the address changes:
127.0.0.1 and a free port instead of 0.0.0.0:8080. The tests share one process and run in file order; the
last one stops it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from tests.deploy.healthcheck import run_healthcheck
from tests.deploy.manifests import (
    SECRET_TEMPLATE,
    Resource,
    config_with_model,
    container,
    container_port,
    env_entries,
    k8s_resources,
    load_dockerfile,
    load_documents,
    only,
    resource_field_value,
)
from tests.deploy.volume import ConfigMapVolume
from tests.ports import free_port

NEW_MODEL = "reload-test-model"


@dataclass(frozen=True, slots=True)
class Pod:
    process: subprocess.Popen[bytes]
    port: int
    """the local port standing in for the container's"""
    container_port: int
    """the port the gateway listens on inside the container (GATEWAY_PORT of the manifest)"""
    env: dict[str, str]
    config: ConfigMapVolume
    container: Resource
    spec: Resource
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def probe_url(self, probe: str) -> str:
        check = self.container[probe]["httpGet"]
        assert container_port(self.container, check["port"]) == self.container_port
        return f"{self.url}{check['path']}"


def container_env(
    item: Resource, secret: dict[str, str], paths: dict[str, Path], image_env: dict[str, str]
) -> dict[str, str]:
    """The variables the kubelet would set, container paths mapped to local ones."""
    env = {name: value for name, value in image_env.items() if name != "PATH"}
    for name, entry in env_entries(item).items():
        if "value" in entry:
            env[name] = entry["value"]
        elif "secretKeyRef" in entry["valueFrom"]:
            reference = entry["valueFrom"]["secretKeyRef"]
            if reference["key"] in secret:
                env[name] = secret[reference["key"]]
            else:  # as the kubelet does: a missing key is an error unless the reference is optional
                assert reference.get("optional"), f"the Secret has no {reference['key']}"
        else:
            env[name] = resource_field_value(item, entry["valueFrom"]["resourceFieldRef"])
    for name, value in env.items():
        for mount_path, local in paths.items():
            if value == mount_path or value.startswith(mount_path + "/"):
                env[name] = str(local) + value[len(mount_path) :]
    return env


def wait_for(url: str, process: subprocess.Popen[bytes], *, budget: float) -> None:
    deadline = time.monotonic() + budget
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the gateway exited with {process.returncode}"
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} did not answer 200 within {budget} s")


@pytest.fixture(scope="module")
def pod(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Iterator[Pod]:
    resources = k8s_resources()
    deployment = only(resources, "Deployment")
    spec: Resource = deployment["spec"]["template"]["spec"]
    item = container(deployment, "gateway")
    root = tmp_path_factory.mktemp("pod")
    paths = {mount["mountPath"]: root / mount["name"] for mount in item["volumeMounts"]}
    for local in paths.values():
        local.mkdir()
    (template,) = load_documents(SECRET_TEMPLATE)
    secret = {key: f"test-{key}-{uuid.uuid4().hex[:8]}" for key in template["stringData"]}
    secret["redis-url"] = redis_url
    secret["ledger-archive-url"] = ""  # no archive: the pod needs no PostgreSQL
    configmap_volumes = {volume["name"] for volume in spec["volumes"] if "configMap" in volume}
    (config_mount,) = [mount for mount in item["volumeMounts"] if mount["name"] in configmap_volumes]
    config = ConfigMapVolume(paths[config_mount["mountPath"]])
    config.write(only(resources, "ConfigMap")["data"])

    env = container_env(item, secret, paths, load_dockerfile().final.env())
    inside_port, port = int(env["GATEWAY_PORT"]), free_port()
    env.update(GATEWAY_HOST="127.0.0.1", GATEWAY_PORT=str(port), TMPDIR=str(paths["/tmp"]))
    base = {name: value for name, value in os.environ.items() if not name.startswith("GATEWAY_")}
    gateway = Path(sys.executable).parent / "gateway"
    log = root / "gateway.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(gateway), *item["args"]],
            cwd=env["GATEWAY_DATA_DIR"],
            env={**base, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        startup = item["startupProbe"]
        running = Pod(process, port, inside_port, env, config, item, spec, log)
        wait_for(
            running.probe_url("startupProbe"),
            process,
            budget=startup["periodSeconds"] * startup["failureThreshold"],
        )
        yield running
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def models(pod: Pod, key: str) -> httpx.Response:
    return httpx.get(f"{pod.url}/v1/models", headers={"authorization": f"Bearer {key}"}, timeout=5)


def test_k8s_pod_becomes_ready_and_stays_alive(pod: Pod) -> None:
    wait_for(pod.probe_url("readinessProbe"), pod.process, budget=30)
    ready = httpx.get(pod.probe_url("readinessProbe"), timeout=5)
    assert ready.json()["checks"] == {"config": "ok", "redis": "ok", "ledger": "ok", "redis_mode": "ok"}
    assert httpx.get(pod.probe_url("livenessProbe"), timeout=5).status_code == 200


def test_k8s_pod_passes_the_images_healthcheck(pod: Pod) -> None:
    assert run_healthcheck(load_dockerfile(), pod.port) == 0


def test_k8s_pod_serves_the_configmap_to_the_secrets_tenant_key(pod: Pod) -> None:
    answer = models(pod, pod.env["DEFAULT_TENANT_KEY"])
    assert answer.status_code == 200
    listed = {model["id"] for model in answer.json()["data"]}
    configured = yaml.safe_load((pod.config.directory / "gateway.yaml").read_text(encoding="utf-8"))["models"]
    assert listed == set(configured)
    assert NEW_MODEL not in listed
    assert models(pod, "sk-not-a-tenant").status_code == 401


def test_k8s_pod_reloads_an_updated_configmap_without_a_restart(pod: Pod) -> None:
    config = (pod.config.directory / "gateway.yaml").read_text(encoding="utf-8")
    pod.config.write({"gateway.yaml": config_with_model(config, NEW_MODEL)})
    deadline, seen = time.monotonic() + 30, 0
    while seen < 6 and time.monotonic() < deadline:  # several answers in a row: every worker reloaded
        listed = {model["id"] for model in models(pod, pod.env["DEFAULT_TENANT_KEY"]).json()["data"]}
        seen = seen + 1 if NEW_MODEL in listed else 0
        time.sleep(0.2)
    assert seen >= 6, pod.log.read_text(errors="replace")[-2000:]
    assert pod.process.poll() is None


def test_k8s_pod_stops_cleanly_within_its_termination_grace(pod: Pod) -> None:
    """Last: it stops the shared process."""
    pre_stop = int(pod.container["lifecycle"]["preStop"]["exec"]["command"][1])
    budget = pod.spec["terminationGracePeriodSeconds"] - pre_stop
    started = time.monotonic()
    pod.process.send_signal(signal.SIGTERM)
    code = pod.process.wait(budget)
    assert code == 0
    assert time.monotonic() - started < budget
