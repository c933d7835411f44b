"""A reader that closes early (``gateway … | head``) ends any command quietly, with the SIGPIPE status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli import BROKEN_PIPE_STATUS
from gateway.commands.store import run_command

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "deploy" / "gateway.example.yaml"


def _run_into_a_closed_pipe(*argv: str) -> subprocess.CompletedProcess[bytes]:
    """Run ``gateway argv`` with stdout a pipe whose reader has already gone, as ``| head`` leaves it."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write now fails with EPIPE: no race with the reader
    try:
        return subprocess.run(
            [sys.executable, "-m", "gateway.cli", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("command", ["check-config", "count"])
def test_cli_closed_pipe_ends_quietly(command: str, tmp_path: Path) -> None:
    request = tmp_path / "request.json"
    request.write_text('{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}')
    argv = {
        "check-config": ("check-config", str(EXAMPLE)),
        "count": ("count", str(request), "--config", str(EXAMPLE), "--json"),
    }[command]
    done = _run_into_a_closed_pipe(*argv)
    assert done.stderr.decode() == ""
    assert done.returncode == BROKEN_PIPE_STATUS == 141


def test_cli_broken_pipe_inside_run_command_reaches_main() -> None:
    """``costs export`` writes to stdout inside ``run_command``: a closed pipe is not a Redis problem."""

    async def write() -> int:
        raise BrokenPipeError(32, "Broken pipe")

    with pytest.raises(BrokenPipeError):
        run_command(write(), command="costs", redis_problem="cannot read the ledger")
