"""The ``gateway`` command: one sub-command per module in ``gateway.commands``."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence

from gateway import __version__
from gateway.commands import MODULES, registrations

BROKEN_PIPE_STATUS = 128 + 13
"""The status of a process that SIGPIPE ends (13 is SIGPIPE on every Unix), which is what a shell shows
for ``grep … | head`` too; Python ignores SIGPIPE, so it has to be said."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``command`` alone when it names one (only its module imported)."""
    parser = argparse.ArgumentParser(
        prog="gateway", description="A cost-aware, OpenAI-compatible LLM gateway."
    )
    parser.add_argument("--version", action="version", version=f"gateway {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in registrations([command] if command in MODULES else MODULES):
        register(subparsers)
    _plain_help(parser)
    return parser


_MODULE_REFERENCE = re.compile(r"\s*\(``gateway\.[\w.]+``\)")
_LITERAL = re.compile(r"``(.+?)``", re.DOTALL)


def plain(text: str | None) -> str | None:
    """Help text written as a docstring, for a terminal: reST literals (````x````) as plain text, and the
    parenthesised names of the gateway's own modules, which only a reader of the code can follow, left out."""
    if text is None:
        return None
    return _LITERAL.sub(r"\1", _MODULE_REFERENCE.sub("", text))


def _plain_help(parser: argparse.ArgumentParser) -> None:
    """Every command's description (its module's docstring) and option help, as ``plain`` text."""
    parser.description = plain(parser.description)
    parser.epilog = plain(parser.epilog)
    for action in parser._actions:
        action.help = plain(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                _plain_help(sub)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. A reader that stops early (``gateway … | head``) ends it quietly, for every
    command at once: output nobody reads is not an error worth a traceback."""
    given = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(_command(given)).parse_args(given)
    try:
        result: int = args.handler(args)
        sys.stdout.flush()  # inside the try: buffered output fails here, not at interpreter exit
    except BrokenPipeError:
        _discard_stdout()
        return BROKEN_PIPE_STATUS
    return result


def _command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option (the root's only option,
    ``--version``, takes no value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def _discard_stdout() -> None:
    """Point stdout at the null device, so that flushing what is still buffered at exit cannot raise
    BrokenPipeError again (Python's recipe in the ``signal`` module's docs)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
