"""The factory ``gateway serve`` hands to uvicorn loads a worker's vocabularies before it imports the app,
so that the moment tiktoken needs its ranks as a Python dict comes while the worker is small."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gateway.config.settings import Settings
from gateway.edge.factory import loaded_counter
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
