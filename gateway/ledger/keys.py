"""The Redis key layout. Every per-tenant key carries the tenant as a hash tag (``gw:{tenant}:…``), so all
of one tenant's keys share a Cluster slot and one Lua script may touch them together.

==========================  ======  =====================================================================
key                         type    holds
==========================  ======  =====================================================================
gw:{t}:costs:2026-11        stream  the month's cost events (field ``event``: the event's JSON)
gw:{t}:order:2026-11        zset    time index of that stream: members ``<time_ms:013d>|<stream id>``
gw:{t}:seen:2026-11         set     ids of the events applied (the dedup marker: replays never count twice)
gw:{t}:daily:2026-11-30     hash    integer counters of the day, overall and per model (``m:<model>:cost``)
gw:{t}:monthly:2026-11      hash    integer counters of the month (``cost``, ``saving``, ``requests``)
gw:{t}:holds                hash    open budget reservations ``r:<request id>`` → nanos, and their ``total``
gw:{t}:holds:expiry         zset    when each open reservation lapses (epoch ms)
gw:{t}:alert:2026-11:80     string  an alert claimed (budget 80% of November): sent at most once
gw:tenants                  set     names of the tenants that have events (single-key operations only)
gw:probe                    string  written to learn whether Redis takes writes again (expires in 60 s)
==========================  ======  =====================================================================

Events belong to the month and day of their own time, not of their writing, so a replay lands in the
same keys as the first attempt. A month's keys expire at the end of the month plus the retention.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LedgerKeys:
    prefix: str = "gw"

    def tenants(self) -> str:
        return f"{self.prefix}:tenants"

    def probe(self) -> str:
        return f"{self.prefix}:probe"

    def stream(self, tenant: str, month: str) -> str:
        return f"{self.prefix}:{{{tenant}}}:costs:{month}"

    def order(self, tenant: str, month: str) -> str:
        return f"{self.prefix}:{{{tenant}}}:order:{month}"

    def seen(self, tenant: str, month: str) -> str:
        return f"{self.prefix}:{{{tenant}}}:seen:{month}"

    def daily(self, tenant: str, day: str) -> str:
        return f"{self.prefix}:{{{tenant}}}:daily:{day}"

    def monthly(self, tenant: str, month: str) -> str:
        return f"{self.prefix}:{{{tenant}}}:monthly:{month}"

    def holds(self, tenant: str) -> str:
        return f"{self.prefix}:{{{tenant}}}:holds"

    def hold_expiry(self, tenant: str) -> str:
        return f"{self.prefix}:{{{tenant}}}:holds:expiry"

    def alert(self, tenant: str, period: str, name: str) -> str:
        return f"{self.prefix}:{{{tenant}}}:alert:{period}:{name}"
