"""What a managed key spent today and this month (UTC), and holds now: the counters the ledger keeps for it
in its tenant's hashes (``k:<key id>:cost``, ``k:<key id>:held``), as decimal USD strings."""

from __future__ import annotations

from redis.asyncio import Redis

from gateway.base.money import usd
from gateway.keys.record import ManagedKey
from gateway.ledger.keys import LedgerKeys
from gateway.ledger.period import day_of, month_of
from gateway.ledger.reply import integer


async def key_spend(redis: Redis, keys: LedgerKeys, key: ManagedKey, *, now_ms: int) -> dict[str, str]:
    tenant = key.tenant
    pipe = redis.pipeline(transaction=False)
    pipe.hget(keys.daily(tenant, day_of(now_ms)), f"k:{key.id}:cost")
    pipe.hget(keys.monthly(tenant, month_of(now_ms)), f"k:{key.id}:cost")
    pipe.hget(keys.holds(tenant), f"k:{key.id}:held")
    today, month, held = await pipe.execute()
    return {
        "day": day_of(now_ms),
        "today_usd": usd(integer(today)),
        "month": month_of(now_ms),
        "this_month_usd": usd(integer(month)),
        "held_usd": usd(max(0, integer(held))),
    }
