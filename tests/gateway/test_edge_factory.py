"""The factory ``gateway serve`` hands to uvicorn loads a worker's vocabularies before it imports the app,
so that the moment tiktoken needs its ranks as a Python dict comes while the worker is small; the worker
it starts freezes its heap once started (``gateway.edge.heap``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.config.settings import Settings
from gateway.edge.factory import loaded_counter
from gateway.edge.heap import YOUNG_THRESHOLD
from tests.factories import make_config, write_config


def test_the_vocabularies_load_before_the_app_is_imported(tmp_path: Path) -> None:
    config = write_config(tmp_path / "gateway.yaml", make_config())
    probe = (
        "import sys; from gateway.config.settings import Settings; "
        "from gateway.edge.factory import loaded_counter; counter = loaded_counter(Settings()); "
        "app = {'fastapi', 'redis', 'gateway.edge.app'}; "
        "print(counter._encodings.loaded(), sorted(app & set(sys.modules)))"
    )
    env = {**os.environ, "GATEWAY_CONFIG": str(config)}
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env
    )
    assert loaded.stdout.strip() == "('o200k_base',) []"


def test_a_config_that_does_not_load_is_left_for_the_lifespan_to_report(tmp_path: Path) -> None:
    assert loaded_counter(Settings(config=tmp_path / "missing.yaml")) is None
    broken = tmp_path / "broken.yaml"
    broken.write_text("providers: [\n")
    assert loaded_counter(Settings(config=broken)) is None


@pytest.mark.redis
def test_a_served_worker_freezes_what_starting_made_and_a_built_app_does_not(
    tmp_path: Path, redis_url: str
) -> None:
    config = write_config(tmp_path / "gateway.yaml", make_config())
    probe = """
import gc
from starlette.testclient import TestClient
from gateway.config.settings import Settings
from gateway.edge.app import create_app
from gateway.edge.factory import create_app_from_env

with TestClient(create_app(Settings())):  # as tests build apps: nothing frozen
    print("probe:", gc.get_freeze_count(), gc.get_threshold()[0])
with TestClient(create_app_from_env()):  # as a served worker starts
    print("probe:", gc.get_freeze_count() > 50_000, gc.get_threshold()[0])

    class Cycle:
        me: object

    made = Cycle()
    made.me = made  # made after the freeze: still collected
    del made
    print("probe:", gc.collect() > 0)
"""
    env = {
        **os.environ,
        "GATEWAY_CONFIG": str(config),
        "GATEWAY_REDIS_URL": redis_url,
        "GATEWAY_DATA_DIR": str(tmp_path / "data"),
    }
    started = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env, cwd=tmp_path
    )
    printed = [line for line in started.stdout.splitlines() if line.startswith("probe: ")]
    assert printed == ["probe: 0 700", f"probe: True {YOUNG_THRESHOLD}", "probe: True"]
