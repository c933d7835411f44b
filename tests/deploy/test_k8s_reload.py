"""Hot reload through a ConfigMap volume: the kubelet swaps the ``..data`` symlink, the gateway sees it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config.loading import ConfigError
from gateway.config.reload import ConfigStore
from tests.deploy.manifests import Resource, config_with_model
from tests.deploy.volume import ConfigMapVolume


def test_k8s_volume_layout_is_the_kubelets(tmp_path: Path) -> None:
    volume = ConfigMapVolume(tmp_path)
    volume.write({"gateway.yaml": "a: 1\n"})
    first = (tmp_path / "..data").resolve()
    volume.write({"gateway.yaml": "a: 2\n"})
    visible = tmp_path / "gateway.yaml"
    assert visible.is_symlink() and visible.readlink() == Path("..data/gateway.yaml")
    assert visible.read_text() == "a: 2\n"
    assert not first.exists(), "the previous version is removed after the swap"
    names = sorted(path.name for path in tmp_path.iterdir())
    assert names == sorted(["..data", (tmp_path / "..data").readlink().name, "gateway.yaml"])


def test_k8s_configmap_update_reaches_the_running_config(tmp_path: Path, configmap: Resource) -> None:
    volume = ConfigMapVolume(tmp_path / "etc-gateway")
    config = configmap["data"]["gateway.yaml"]
    volume.write({"gateway.yaml": config})
    store = ConfigStore(volume.directory / "gateway.yaml")
    assert "reload-test-model" not in store.current.routes
    assert not store.changed()

    volume.write({"gateway.yaml": config_with_model(config, "reload-test-model")})

    assert store.changed()
    store.reload()
    assert "reload-test-model" in store.current.routes
    assert not store.changed()


def test_k8s_invalid_configmap_update_keeps_the_last_good_config(tmp_path: Path, configmap: Resource) -> None:
    volume = ConfigMapVolume(tmp_path / "etc-gateway")
    volume.write({"gateway.yaml": configmap["data"]["gateway.yaml"]})
    store = ConfigStore(volume.directory / "gateway.yaml")
    before = store.current

    volume.write({"gateway.yaml": "models: [\n"})

    assert store.changed()
    with pytest.raises(ConfigError, match="not valid YAML"):
        store.reload()
    assert store.current is before
