"""``gateway check-config FILE``: validate a config file and show, per model, the bands and actions."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gateway.config.loading import ConfigError, load_config
from gateway.config.runtime import build_engine
from gateway.config.startup import RUN_SCRIPT_KEY, made_by_run_script, startup_notices
from policies import describe


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
    notices = startup_notices(config, args.file.read_text(encoding="utf-8"))
    noted = [notice for notice in notices if notice.level == "warning" and made_by_run_script(notice)]
    warnings = [notice.text for notice in notices if notice.level == "warning" and notice not in noted]
    count = f" ({len(warnings)} warning{'s' if len(warnings) != 1 else ''})" if warnings else ""
    print(f"{args.file}: valid{count}")
    for warning in warnings:
        print(f"  warning: {warning}")
    for notice in noted:
        print(
            f"  note: tenant {notice.fields['tenant']} takes its key from {RUN_SCRIPT_KEY}, unset here: "
            f"./bin/run makes one (in .gateway-data/default-tenant-key) and exports it; started any other "
            f"way, set it, or the tenant's requests get 401"
        )
    for name, provider in config.providers.items():
        print(f"  provider {name}: {provider.base_url} (API key {'set' if provider.api_key else 'not set'})")
    for name, tenant in config.tenants.items():
        budget = " (budget)" if tenant.budget is not None else ""
        cache = tenant.response_cache
        if cache is not None:
            which = "deterministic requests" if cache.deterministic_only else "all requests"
            budget += f" (response cache: {which}, {cache.ttl_seconds:,} s, {cache.max_entries:,} answers)"
        keys = f"{len(tenant.key_hashes())} of {len(tenant.keys)} key(s) set"
        managed = " (and managed keys)" if config.keys.managed else ""
        print(f"  tenant {name}: {keys}{managed}{budget}")
    for name, model in config.models.items():
        fallbacks = f", fallbacks {', '.join(model.fallbacks)}" if model.fallbacks else ""
        tiers = ""
        if model.pricing is not None and model.pricing.tiers:
            tiers = f", price tier above {model.pricing.tiers[0].above_input_tokens:,}"
        upstream = f"{model.provider}/{model.upstream_model or name}"
        print(f"  model {name} ({model.kind}): {upstream}{tiers}{fallbacks}")
    for name, experiment in config.experiments.items():
        state = "" if experiment.enabled else " (disabled)"
        budget = (
            f", ${experiment.budget_usd_per_day}/day" if experiment.budget_usd_per_day is not None else ""
        )
        print(
            f"  experiment {name} ({experiment.mode}{state}): {', '.join(experiment.primary)} -> "
            f"{experiment.candidate}, {experiment.sample_rate:.0%}{budget}"
        )
    print()
    for view in describe(build_engine(config)):
        bands = view.bands
        print(f"{view.model}: warning line {bands.warning:,}, cliff {bands.cliff:,}, window {bands.window:,}")
        for policy in view.policies:
            flags = "".join(
                [
                    " [observe]" if policy.observe else "",
                    " [allow_over_cliff]" if policy.allow_over_cliff else "",
                ]
            )
            print(f"  policy {policy.policy} ({policy.match}){flags}")
            for row in policy.rows:
                last = f"{row.last:,}" if row.last is not None else "…"
                span = f"{row.first:>9,} to {last:<9}"
                print(f"    {row.band.value:<14} {span} {row.action.value:<8} {row.detail}")
    return 0
