"""``bin/test`` (what CI runs): the whole suite against the system's Redis when there is one, then the tests
that use Redis again against the embedded server; once against the embedded server otherwise; each run spread
over the cores (pytest-xdist). ``bin/setup``, ruff, mypy and pytest are replaced here by stand-ins that record
how they were called."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
XDIST = "-n auto --dist loadfile"
"""What bin/test puts before the caller's arguments: the tests spread over the cores (pytest-xdist)."""

PYTEST = """\
#!/bin/sh
echo "${GATEWAY_TEST_REDIS_SERVER:-unset}|${GATEWAY_TEST_REDIS_URL:-unset}|$*" >> calls
n=$(wc -l < calls)
code=$(sed -n "${n}p" codes 2>/dev/null)
exit "${code:-0}"
"""


def checkout(tmp_path: Path, *, system_redis: bool) -> Path:
    root = tmp_path / "checkout"
    (root / "bin").mkdir(parents=True)
    (root / ".venv" / "bin").mkdir(parents=True)
    shutil.copy2(ROOT / "bin" / "test", root / "bin" / "test")
    stubs = {"bin/setup": "#!/bin/sh\n", ".venv/bin/ruff": "#!/bin/sh\n", ".venv/bin/mypy": "#!/bin/sh\n"}
    for name, text in {**stubs, ".venv/bin/pytest": PYTEST}.items():
        (root / name).write_text(text)
        (root / name).chmod(0o755)
    tools = tmp_path / "path"  # the PATH bin/test sees: the basics, and a redis-server or not
    tools.mkdir()
    for tool in ("dirname", "env", "sed", "wc"):
        (tools / tool).symlink_to(shutil.which(tool) or tool)
    if system_redis:
        (tools / "redis-server").write_text("#!/bin/sh\n")
        (tools / "redis-server").chmod(0o755)
    return root


def run(root: Path, *args: str, codes: tuple[int, ...] = (), **env: str) -> tuple[int, list[str]]:
    (root / "codes").write_text("".join(f"{code}\n" for code in codes))
    path = str(root.parent / "path")
    environ = {"PATH": path, "HOME": os.environ.get("HOME", "/"), **env}
    done = subprocess.run(["/bin/sh", str(root / "bin" / "test"), *args], env=environ, cwd=root.parent)
    calls = root / "calls"
    return done.returncode, calls.read_text().splitlines() if calls.exists() else []


def test_the_suite_runs_on_the_system_redis_then_the_redis_tests_on_the_embedded(tmp_path: Path) -> None:
    root = checkout(tmp_path, system_redis=True)
    assert run(root, "-q", "tests/x") == (
        0,
        [f"system|unset|{XDIST} -q tests/x", f"embedded|unset|-m redis and not e2e {XDIST} -q tests/x"],
    )


def test_without_a_system_redis_the_whole_suite_runs_once_on_the_embedded(tmp_path: Path) -> None:
    root = checkout(tmp_path, system_redis=False)
    assert run(root, "-q") == (0, [f"embedded|unset|{XDIST} -q"])


def test_a_named_database_takes_the_first_run_and_the_embedded_server_the_second(tmp_path: Path) -> None:
    root = checkout(tmp_path, system_redis=False)
    code, calls = run(root, GATEWAY_TEST_REDIS_URL="redis://127.0.0.1:6379/9")
    assert (code, calls) == (
        0,
        [f"system|redis://127.0.0.1:6379/9|{XDIST}", f"embedded|unset|-m redis and not e2e {XDIST}"],
    )


def test_a_second_run_that_selects_no_redis_test_is_no_failure(tmp_path: Path) -> None:
    root = checkout(tmp_path, system_redis=True)
    assert run(root, "tests/policies", codes=(0, 5))[0] == 0


def test_a_failure_in_either_run_fails_bin_test(tmp_path: Path) -> None:
    root = checkout(tmp_path, system_redis=True)
    assert run(root, codes=(0, 1)) == (
        1,
        [f"system|unset|{XDIST}", f"embedded|unset|-m redis and not e2e {XDIST}"],
    )
    (root / "calls").unlink()
    assert run(root, codes=(1,)) == (1, [f"system|unset|{XDIST}"])  # stops at the first failure


def test_a_server_chosen_by_the_caller_runs_the_whole_suite_once(tmp_path: Path) -> None:
    root = checkout(tmp_path, system_redis=True)
    assert run(root, "-x", GATEWAY_TEST_REDIS_SERVER="embedded") == (0, [f"embedded|unset|{XDIST} -x"])
