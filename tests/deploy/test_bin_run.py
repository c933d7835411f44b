"""``bin/run`` installs on the first run and again only when ``pyproject.toml`` changed since the last
install; ``bin/setup`` (replaced here by a stand-in that records its calls) leaves the stamp it reads."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SETUP = """\
#!/usr/bin/env sh
set -eu
cd "$(dirname "$0")/.."
echo setup >> calls
mkdir -p .venv/bin
printf '#!/usr/bin/env sh\\necho "gateway $*"\\n' > .venv/bin/gateway
chmod +x .venv/bin/gateway
touch .venv/.installed
"""


def checkout(tmp_path: Path) -> Path:
    (tmp_path / "bin").mkdir()
    shutil.copy2(ROOT / "bin" / "run", tmp_path / "bin" / "run")
    (tmp_path / "bin" / "setup").write_text(SETUP)
    (tmp_path / "bin" / "setup").chmod(0o755)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'gateway'\n")
    return tmp_path


def run(root: Path) -> str:
    env = {**os.environ, "DEFAULT_TENANT_KEY": "sk-test"}
    done = subprocess.run(
        [str(root / "bin" / "run"), "--port", "9000"], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def setups(root: Path) -> int:
    calls = root / "calls"
    return len(calls.read_text().split()) if calls.exists() else 0


def test_the_real_setup_leaves_the_stamp_bin_run_reads() -> None:
    assert "touch .venv/.installed" in (ROOT / "bin" / "setup").read_text()
    assert ".venv/.installed" in (ROOT / "bin" / "run").read_text()


def test_bin_run_installs_on_a_fresh_checkout_then_only_after_pyproject_changes(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    assert run(root) == "gateway serve --port 9000\n"
    assert setups(root) == 1
    run(root)
    assert setups(root) == 1  # nothing changed: no install
    edited = (root / "pyproject.toml").stat().st_mtime
    os.utime(root / ".venv" / ".installed", (edited - 10, edited - 10))  # pyproject.toml edited since
    run(root)
    assert setups(root) == 2
    run(root)
    assert setups(root) == 2


def test_bin_run_installs_again_when_the_venv_lost_the_gateway(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    run(root)
    (root / ".venv" / "bin" / "gateway").unlink()
    assert run(root) == "gateway serve --port 9000\n"
    assert setups(root) == 2


def test_bin_run_exports_a_generated_tenant_key_for_any_config(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    run(root)  # installs the stand-in
    (root / ".venv" / "bin" / "python").symlink_to(sys.executable)
    gateway = root / ".venv" / "bin" / "gateway"
    gateway.write_text('#!/usr/bin/env sh\necho "key=$DEFAULT_TENANT_KEY config=$GATEWAY_CONFIG"\n')
    env = {k: v for k, v in os.environ.items() if k not in ("DEFAULT_TENANT_KEY", "GATEWAY_DATA_DIR")}
    outputs = [
        subprocess.run(
            [str(root / "bin" / "run")],
            env={**env, "GATEWAY_CONFIG": config},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for config in ("my-copy.yaml", "another.yaml")
    ]
    key = (root / ".gateway-data" / "default-tenant-key").read_text().strip()
    assert key.startswith("sk-gw-")
    for output, config in zip(outputs, ("my-copy.yaml", "another.yaml"), strict=True):
        assert f"key={key} config={config}" in output  # one key, kept, whichever config is pointed at
        assert "default-tenant-key" in output
