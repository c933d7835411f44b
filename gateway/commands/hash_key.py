"""``gateway hash-key``: print the ``sha256:<hex>`` form of an API key read from stdin, for the config."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gateway.config.schema.root import KEY_HASH_PREFIX, hash_key


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser("hash-key", help="hash an API key read from stdin", description=__doc__)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    key = sys.stdin.readline().strip()
    if not key:
        print("gateway hash-key: no key on stdin", file=sys.stderr)
        return 1
    print(f"{KEY_HASH_PREFIX}{hash_key(key)}")
    return 0
