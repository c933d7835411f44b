"""The ``gateway`` CLI imports only the module of the command it runs: ``gateway serve`` (where the one
worker runs, by default) holds none of the cost reports', probes' or replay's imports."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from gateway.cli import build_parser
from gateway.commands import MODULES


def commands(parser: argparse.ArgumentParser) -> set[str]:
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found |= set(action.choices)
    return found


def test_the_table_names_every_command_the_modules_register() -> None:
    assert commands(build_parser()) == set(MODULES)


@pytest.mark.parametrize("command", sorted(MODULES))
def test_a_command_is_registered_by_the_module_the_table_names(command: str) -> None:
    assert command in commands(build_parser(command))


def test_a_word_that_is_no_command_gets_every_command_for_its_error() -> None:
    assert commands(build_parser("serv")) == set(MODULES)


def test_serving_imports_no_other_command() -> None:
    probe = (
        "import sys; from gateway.cli import build_parser; build_parser('serve'); "
        "print(sorted(name for name in sys.modules if name.startswith('gateway.commands.')))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "['gateway.commands.serve']"
