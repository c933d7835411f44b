"""Sub-commands of the ``gateway`` CLI. Each command's module exposes ``register(subparsers)``, which adds
its parser and sets ``handler`` (a callable taking the parsed namespace and returning an exit code);
``store`` holds what the commands that use the gateway's Redis share."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from gateway.commands import check_config, costs, count, experiments, hash_key, keys, probes, replay, serve

Register = Callable[["argparse._SubParsersAction[Any]"], None]

COMMANDS: tuple[Register, ...] = (
    serve.register,
    check_config.register,
    hash_key.register,
    count.register,
    costs.register,
    probes.register,
    experiments.register,
    replay.register,
    keys.register,
)
