"""``gateway … --help`` reads as help: the commands' descriptions are their modules' docstrings, shown
without reST markup or the names of internal modules."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from gateway.cli import build_parser, plain


def parsers(
    parser: argparse.ArgumentParser, path: str = "gateway"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, f"{path} {name}")


@pytest.mark.parametrize(("path", "parser"), list(parsers(build_parser())), ids=lambda item: str(item))
def test_help_has_no_rest_markup(path: str, parser: argparse.ArgumentParser) -> None:
    shown = parser.format_help()
    assert "``" not in shown, path
    assert "(gateway." not in shown, path


def test_plain_turns_literals_into_text_and_drops_module_references() -> None:
    written = "``gateway serve``: run it (``gateway.edge.server_protocol``); ``--port`` is\n``GATEWAY_PORT``."
    assert plain(written) == "gateway serve: run it; --port is\nGATEWAY_PORT."
    assert plain(None) is None
