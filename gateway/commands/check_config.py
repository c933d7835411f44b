"""``gateway check-config FILE``: validate a config file and summarise what it defines."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gateway.configfile import ConfigError, load_config


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser("check-config", help="validate a config file", description=__doc__)
    parser.add_argument("file", type=Path, help="the YAML config file")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.file)
    except ConfigError as exc:
        print(exc)
        return 1
    print(f"{args.file}: valid")
    print(f"  providers: {', '.join(config.providers) or '-'}")
    for name, model in config.models.items():
        fallbacks = f" -> fallbacks {', '.join(model.fallbacks)}" if model.fallbacks else ""
        upstream = model.upstream_model or name
        print(f"  model {name}: {model.provider}/{upstream}, window {model.context_window:,}{fallbacks}")
    for name, tenant in config.tenants.items():
        print(f"  tenant {name}: {len(tenant.key_hashes())} key(s)")
    return 0
