"""What the gateway really saves, with the provider's prompt cache simulated, against what its ledger claims.

Run: ``.venv/bin/python -m tests.bench.bench_savings [--workloads chat,short,tools] [--patterns …]``.

Three scripted sessions (``tests.bench.savings``: the client resends its whole history every turn and
appends scripted answers, so every run sends the same prompts) are replayed against the caching mock
upstream (``tests.mock.cache``): straight to it (forwarding everything unchanged), then through a gateway
with the shipped policies and a priced cheap model. Per workload it prints the cost forwarded unchanged,
the cost through the gateway (its requests and side calls, from its ledger), the saving the ledger claims,
the real saving (the difference of the two bills) and how far the claim is from it, beside a third
baseline: what a client that compacts its own history at 240K tokens would have paid (summaries at the
cheap model's price).

Then the ledger's claim against the real saving in the patterns where the two used to part
(``--patterns``, families of ``bench_families``; an empty value skips them): a conversation back after a
pause longer than the cache's retention (``idle``), an edited first message, a retry and a branch back to
before a compaction (``edits``), a tool loop whose history passes the model's window (``window``), Claude
on the Messages API, whose counts are estimates (``claude``), a Responses agent loop (``codex``), and the
long chat for reference (``chat``). Background pre-compression's cheap calls are side events of their own
in every pattern, so each claim is net of them. The claim should be within 0.85-1.15 of the real saving.
"""

from __future__ import annotations

import argparse
import uuid

import orjson

from tests.bench.bench_families import Row, claim, run_families
from tests.bench.savings import Result, mock_and_gateway, run, usd

PATTERNS = "chat,idle,edits,window,claude,codex"


def workloads_table(results: list[Result]) -> str:
    header = (
        "workload",
        "requests",
        "unchanged",
        "client compacts",
        "gateway",
        "share",
        "claimed",
        "real",
        "claim/real",
        "over cliff",
        "actions",
    )
    lines = [" | ".join(header)]
    for result in results:
        ratio = result.claimed_nanos / result.real_nanos if result.real_nanos else float("nan")
        actions = ", ".join(f"{key} {value}" for key, value in sorted(result.actions.items()))
        cells = [
            result.workload,
            str(result.requests),
            usd(result.unchanged_nanos),
            usd(result.client_nanos),
            usd(result.gateway_nanos),
            f"{result.gateway_nanos / result.unchanged_nanos:.1%}",
            usd(result.claimed_nanos),
            usd(result.real_nanos),
            f"{ratio:.3f}",
            str(result.over_cliff),
            actions,
        ]
        lines.append(" | ".join(cells))
    return "\n".join(lines)


def patterns_table(rows: list[Row]) -> str:
    header = ("pattern", "what", "requests", "claimed / real saving (ratio)", "bases")
    lines = [" | ".join(header), " | ".join("---" for _ in header)]
    for row in rows:
        bases = ", ".join(f"{name} {count}" for name, count in sorted(row.bases.items()))
        real = row.possible_nanos - row.gateway_nanos
        cells = [row.family, row.description, str(row.requests), claim(row.claimed_nanos, real), bases]
        lines.append(" | ".join(cells))
    return "\n".join(f"| {line} |" for line in lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workloads", default="chat,short,tools")
    parser.add_argument("--patterns", default=PATTERNS, help="families of bench_families; '' for none")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument(
        "--compress", default="{}", help='policy compress settings as JSON, e.g. \'{"timing": "eager"}\''
    )
    args = parser.parse_args()
    compress = orjson.loads(args.compress)
    names = [name for name in args.workloads.split(",") if name]
    suffix = uuid.uuid4().hex[:8]
    tenants = {f"{name}-{suffix}": {"keys": [f"sk-bench-{name}"]} for name in names}
    if names:
        with mock_and_gateway(tenants, compress, args.redis_url) as (mock, gateway):
            results = [run(name, mock, gateway, f"sk-bench-{name}", f"{name}-{suffix}") for name in names]
        print(workloads_table(results))
    patterns = [name for name in args.patterns.split(",") if name]
    if patterns:
        print()
        print(patterns_table(run_families(patterns, compress, args.redis_url)))


if __name__ == "__main__":
    main()
