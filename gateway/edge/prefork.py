"""Workers forked from the serving process, so that what it loaded before them is shared, not copied.

uvicorn's supervisor (``uvicorn.supervisors.multiprocess``) starts each worker with multiprocessing's
spawn: a fresh interpreter that imports everything, builds its own tokenizer (tiktoken's maps for
o200k_base take about 40 MiB) and its own app. Here the same supervisor runs (health checks, restarts,
SIGHUP, SIGTTIN and SIGTTOU, shutdown on SIGTERM or SIGINT), but its workers are forked from a process
that has already loaded the app (``uvicorn.Config.load`` calls the factory: the vocabularies, the modules
and the app itself; each worker still runs the lifespan). The pages filled before the fork stay shared
between the workers until one writes to them, and nothing writes to tiktoken's maps; ``gc.freeze`` keeps
the collector from writing to the objects made before the fork.

A forked worker starts as a spawned one would, as far as it can tell: the supervisor's signal handlers are
put back to Python's defaults and its exit handlers are dropped; the worker's own exit handlers run when
it returns (multiprocessing ends a forked child with ``os._exit``, which would skip them). Anything random
must be seeded again in the child (``gateway.core.request_ids`` does so; ``random`` reseeds itself).

Forking is only safe with no other thread running: a thread's locks and half-done work would be copied
without the thread. ``fork_safe`` says whether that holds; the caller spawns otherwise.
"""

from __future__ import annotations

import atexit
import gc
import multiprocessing
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.process import BaseProcess
from socket import socket

from uvicorn import Config
from uvicorn._subprocess import subprocess_started
from uvicorn.supervisors import multiprocess

_FORK = multiprocessing.get_context("fork")
_MAKER = "get_subprocess"
"""The function uvicorn's supervisor makes each worker process with (``uvicorn._subprocess``'s, spawning)."""


def fork_safe() -> bool:
    """Whether this process may fork its workers: it runs no thread but the main one, and uvicorn's
    supervisor still makes its workers through the function ``run_forked`` replaces."""
    return threading.active_count() == 1 and hasattr(multiprocess, _MAKER)


def run_forked(config: Config, sockets: list[socket]) -> None:
    """uvicorn's supervisor with ``config.workers`` workers on ``sockets``, each forked from this process."""
    config.get_loop_factory()  # imports the event loop's module (uvloop) here rather than in each worker
    if threading.active_count() > 1:
        raise RuntimeError("a thread started in the serving process: its workers cannot be forked safely")
    gc.freeze()  # what exists now is shared with the workers: the collector leaves it alone
    with _forking():
        multiprocess.Multiprocess(config, sockets=sockets).run()


@contextmanager
def _forking() -> Iterator[None]:
    spawning = getattr(multiprocess, _MAKER)
    setattr(multiprocess, _MAKER, forked_subprocess)
    try:
        yield
    finally:
        setattr(multiprocess, _MAKER, spawning)


def forked_subprocess(config: Config, target: Callable[..., None], sockets: list[socket]) -> BaseProcess:
    """A worker process, not started yet, that forks where uvicorn's ``get_subprocess`` would spawn."""
    kwargs = {"config": config, "target": target, "sockets": sockets}
    return _FORK.Process(target=_worker, kwargs=kwargs)


def _worker(config: Config, target: Callable[..., None], sockets: list[socket]) -> None:
    """Runs in the forked child: a spawned worker's start, uvicorn's, then its exit handlers."""
    for signum in multiprocess.SIGNALS:
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    atexit._clear()  # the supervisor's: stopping what it started is its own business
    try:
        subprocess_started(config=config, target=target, sockets=sockets, stdin_fileno=None)
    finally:
        atexit._run_exitfuncs()
