"""Running the image's HEALTHCHECK command on this machine, the way Docker runs it inside the container."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.deploy.dockerfile import Dockerfile


def run_healthcheck(dockerfile: Dockerfile, port: int) -> int:
    """The command's exit code against 127.0.0.1:``port``; its ``python`` is the image's venv interpreter."""
    command = dockerfile.healthcheck()
    assert command is not None and command[0] == "python"
    env = {**os.environ, "GATEWAY_PORT": str(port)}
    return subprocess.run([sys.executable, *command[1:]], env=env, timeout=30, capture_output=True).returncode
