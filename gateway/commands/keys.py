"""``gateway keys create|list|show|rotate|revoke``: managed API keys, the admin API's ``/admin/keys`` from
a shell.

The command writes the gateway's Redis directly, through the same store and the same checks as the admin
API (the tenant must be in the config, the models served, the tags valid), so it needs no admin key and
works while no gateway runs (a first key before the first start, or a revocation while the gateways are
being replaced); running gateways see the change within ``keys.refresh_seconds``. It reads the config
(``--config`` or ``GATEWAY_CONFIG``) for those checks and for the ledger's key prefix, and refuses to run
when ``keys.managed`` is off there. A new secret is printed once, in the JSON of ``create`` and ``rotate``.
"""

from __future__ import annotations

import argparse
import sys
import time
from decimal import Decimal
from typing import Any

import orjson

from gateway.base.errors import GatewayError
from gateway.commands.store import (
    CommandError,
    gateway_config,
    open_store,
    redis_url,
    run_command,
    store_options,
)
from gateway.config.schema.root import GatewayConfig
from gateway.config.settings import Settings
from gateway.keys.record import ManagedKey
from gateway.keys.request import create_key, new_key_of
from gateway.keys.store import KeyStore


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    keys = subparsers.add_parser("keys", help="API keys managed outside the config", description=__doc__)
    actions = keys.add_subparsers(dest="keys_action", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="create a key and print its secret (once)")
    create.add_argument("--tenant", required=True, help="a tenant of the config")
    create.add_argument("--name", required=True, help="what the key is for")
    create.add_argument("--expires-at", help="ISO 8601 date and time (UTC without a zone)")
    create.add_argument("--model", action="append", dest="models", help="an allowed model (repeat for more)")
    create.add_argument("--tag", action="append", default=[], help="a default cost tag, key=value (repeat)")
    create.add_argument("--daily-usd", type=Decimal, help="the key's daily budget in USD")
    create.add_argument("--monthly-usd", type=Decimal, help="the key's monthly budget in USD")
    create.add_argument("--soft-budget", action="store_true", help="the budget only warns (not hard)")
    create.add_argument("--requests-per-minute", type=int, help="the key's own rate limit of requests")
    create.add_argument("--tokens-per-minute", type=int, help="the key's own rate limit of tokens")
    create.add_argument("--usd-per-minute", type=Decimal, help="the key's own rate limit of dollars")
    listed = actions.add_parser("list", help="list keys (never their secrets)")
    listed.add_argument("--tenant", help="only this tenant's keys")
    listed.add_argument("--json", action="store_true", help="print JSON rather than a table")
    show = actions.add_parser("show", help="one key, as JSON")
    show.add_argument("id")
    rotate = actions.add_parser("rotate", help="issue a new secret; the old one works for the overlap")
    rotate.add_argument("id")
    rotate.add_argument("--overlap-seconds", type=int, help="default: keys.rotation_overlap_seconds")
    revoke = actions.add_parser("revoke", help="refuse the key from now on, everywhere")
    revoke.add_argument("id")
    for each in (create, listed, show, rotate, revoke):
        store_options(each)
        each.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    return run_command(_run(args, Settings()), command="keys", redis_problem="Redis refused the change")


async def _run(args: argparse.Namespace, settings: Settings) -> int:
    config = gateway_config(args.config, settings, defaults="")
    if config is None or not config.keys.managed:
        raise CommandError("managed keys are off: set keys.managed: true in the gateway's config")
    client = await open_store(redis_url(args.redis_url, settings), settings)
    store, now = KeyStore(client, prefix=config.ledger.key_prefix), time.time()
    try:
        if args.keys_action == "create":
            key, secret = await _create(store, args, config, now)
            _print({**key.public(now), "secret": secret})
        elif args.keys_action == "list":
            _print_list(await store.list(args.tenant), now, as_json=args.json)
        elif args.keys_action == "show":
            _print((await store.get(args.id)).public(now))
        elif args.keys_action == "rotate":
            overlap = args.overlap_seconds
            if overlap is None:
                overlap = config.keys.rotation_overlap_seconds
            if overlap < 0:
                raise CommandError("--overlap-seconds cannot be negative")
            key, secret = await store.rotate(args.id, now=now, overlap_seconds=overlap)
            _print({**key.public(now), "secret": secret})
        else:
            _print((await store.revoke(args.id, now=now)).public(now))
    except GatewayError as exc:
        raise CommandError(exc.message) from exc
    finally:
        await client.aclose()
    return 0


async def _create(
    store: KeyStore, args: argparse.Namespace, config: GatewayConfig, now: float
) -> tuple[ManagedKey, str]:
    body: dict[str, Any] = {"tenant": args.tenant, "name": args.name, "tags": _tags(args.tag)}
    if args.expires_at:
        body["expires_at"] = args.expires_at
    if args.models:
        body["models"] = args.models
    if args.daily_usd is not None or args.monthly_usd is not None:
        budget = {"daily_usd": args.daily_usd, "monthly_usd": args.monthly_usd, "hard": not args.soft_budget}
        body["budget"] = {name: value for name, value in budget.items() if value is not None}
    limits = {
        "requests_per_minute": args.requests_per_minute,
        "tokens_per_minute": args.tokens_per_minute,
        "usd_per_minute": args.usd_per_minute,
    }
    if any(value is not None for value in limits.values()):
        body["rate_limits"] = {name: value for name, value in limits.items() if value is not None}
    asked = new_key_of(orjson.dumps(body, default=str), config, now=now)
    return await create_key(store, asked, now=now)


def _tags(pairs: list[str]) -> dict[str, str]:
    tags = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise CommandError(f"--tag {pair!r} is not key=value")
        tags[key.strip()] = value.strip()
    return tags


def _print(data: dict[str, Any]) -> None:
    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")


def _print_list(keys: list[ManagedKey], now: float, *, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(orjson.dumps([key.public(now) for key in keys]).decode() + "\n")
        return
    print(f"{'id':<12}  {'tenant':<20}  {'status':<8}  {'expires_at':<20}  name")
    for key in keys:
        shown = key.public(now)
        expires = shown["expires_at"] or "-"
        print(f"{key.id:<12}  {key.tenant[:20]:<20}  {shown['status']:<8}  {expires:<20}  {key.name}")
