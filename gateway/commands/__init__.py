"""Sub-commands of the ``gateway`` CLI. Each command's module exposes ``register(subparsers)``, which adds
its parser and sets ``handler`` (a callable taking the parsed namespace and returning an exit code);
``store`` holds what the commands that use the gateway's Redis share.

A command's module is imported only when it is run (or when all are listed, for ``--help``): each
imports what its work needs, and a worker started by ``gateway serve`` (where ``serve`` runs, with one
worker) would otherwise hold every other command's imports too (the cost reports, the probes, replay).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Iterable
from typing import Any

Register = Callable[["argparse._SubParsersAction[Any]"], None]

MODULES: dict[str, str] = {
    "serve": "serve",
    "check-config": "check_config",
    "hash-key": "hash_key",
    "count": "count",
    "costs": "costs",
    "probes": "probes",
    "probe": "probes",
    "experiments": "experiments",
    "replay": "replay",
    "keys": "keys",
}
"""Each command, in the order ``--help`` lists them, and the module of this package that registers it."""


def registrations(commands: Iterable[str]) -> tuple[Register, ...]:
    """The ``register`` functions of the modules that add ``commands`` (each module once, in order)."""
    modules = dict.fromkeys(MODULES[command] for command in commands)
    return tuple(importlib.import_module(f"{__name__}.{module}").register for module in modules)
