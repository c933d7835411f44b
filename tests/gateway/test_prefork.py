"""A worker forked by ``gateway.edge.prefork`` starts as a spawned one would: Python's own signal handlers,
none of the supervisor's exit handlers, and its own run when it stops."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from gateway.edge.prefork import fork_safe
from tests.e2e.processes import ROOT

SUPERVISOR = """
import atexit, signal, sys
from uvicorn import Config
from gateway.edge.prefork import forked_subprocess

def note(text):
    with open(sys.argv[1], "a") as out:
        out.write(text + "\\n")

def worker(sockets):
    shown = []
    for name in ("SIGHUP", "SIGTERM", "SIGINT"):
        handler = signal.getsignal(getattr(signal, name))
        shown.append(f"{name}={'SIG_DFL' if handler == signal.SIG_DFL else handler.__name__}")
    note(" ".join(shown))
    atexit.register(note, "the worker's exit handler")

atexit.register(note, "the supervisor's exit handler")
for signum in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
    signal.signal(signum, lambda signum, frame: None)
process = forked_subprocess(Config("unused:app"), worker, [])
process.start()
process.join()
note(f"exit code {process.exitcode}")
atexit.unregister(note)
"""


def test_a_forked_worker_has_default_signal_handlers_and_only_its_own_exit_handlers(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    subprocess.run([sys.executable, "-c", SUPERVISOR, str(notes)], cwd=ROOT, check=True)
    assert notes.read_text().splitlines() == [
        "SIGHUP=SIG_DFL SIGTERM=SIG_DFL SIGINT=default_int_handler",
        "the worker's exit handler",
        "exit code 0",
    ]


def test_a_process_running_another_thread_is_not_fork_safe() -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not fork_safe()
    finally:
        stop.set()
        thread.join()
