"""The ``gateway`` command: one sub-command per module in ``gateway.commands``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gateway import __version__
from gateway.commands import COMMANDS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gateway", description="A cost-aware, OpenAI-compatible LLM gateway."
    )
    parser.add_argument("--version", action="version", version=f"gateway {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in COMMANDS:
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.handler(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
