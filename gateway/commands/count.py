"""``gateway count FILE``: count a request's prompt tokens offline, place it in its model's bands and
project its cost at the normal price and at the price-cliff tier.

FILE is a chat completions (or embeddings) request as JSON, ``-`` for stdin. The output tokens of the
projection are the request's ``max_completion_tokens`` / ``max_tokens``, else 0. An embeddings request
(a model of kind ``embedding``, or a body with ``input`` and no ``messages``) is counted by its input, and
has no bands.

The config is ``--config`` (which must load), else ``GATEWAY_CONFIG``; when that file is missing or does
not load, the built-in defaults apply (a note on stderr says so): tokens are counted with the default
encodings, without bands or prices.

The bands are the policy engine's for that model (``gateway check-config`` lists them): by default the
cliff is the model's first price tier line and the warning line 250/272 of it; a model without a tier has
both at its context window. ``over_cliff`` means more tokens than the cliff.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from gateway.base.money import usd
from gateway.base.types import Usage
from gateway.commands.store import CommandError, gateway_config
from gateway.config.runtime import build_engine
from gateway.config.schema.root import GatewayConfig, ModelConfig
from gateway.config.settings import Settings
from gateway.money.pricing import Cost, applicable_tier, price_at_tier
from gateway.tokens.counter import TokenCount, TokenCounter
from gateway.tokens.vocab import VocabularyError


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "count",
        help="count a request's tokens, band and projected cost",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", help="a chat completions or embeddings request as JSON, or - for stdin")
    parser.add_argument("--model", help="count for this model instead of the request's")
    parser.add_argument("--config", type=Path, help="the YAML config (default: GATEWAY_CONFIG)")
    parser.add_argument("--json", action="store_true", help="print JSON for machines")
    parser.set_defaults(handler=run)


@dataclass(frozen=True, slots=True)
class Projection:
    usd: str
    nanos: int


@dataclass(frozen=True, slots=True)
class CountReport:
    model: str
    encoding: str
    approximate: bool
    kind: str | None
    """chat or embedding, as the config defines the model; None for a model the config does not define."""
    request: str
    """chat or embeddings: how the request was counted; an embeddings request's input tokens are in
    ``messages``, as ``TokenCount`` keeps them."""
    messages: int
    tools: int
    images: int
    total: int
    output_tokens: int
    band: str | None
    """below_warning, warning or over_cliff; None for an embedding model (bands are for chat models) and
    for a model the config does not define."""
    warning_line: int | None
    cliff: int | None
    normal: Projection | None
    at_cliff: Projection | None
    """At the first price tier's rates; None without pricing or tiers."""
    billed_at: str | None
    """Which of the two the request would actually be billed at: normal or cliff."""


DEFAULTS = GatewayConfig(providers={}, models={})
"""The built-in defaults without a config file: default counting, no models (so no bands or prices)."""


def run(args: argparse.Namespace) -> int:
    try:
        body = _read_request(args.file, sys.stdin.buffer)
    except (OSError, ValueError) as exc:  # orjson.JSONDecodeError is a ValueError
        print(f"gateway count: {exc}", file=sys.stderr)
        return 2
    try:
        config = gateway_config(args.config, Settings(), defaults="token counting (no bands or prices)")
    except CommandError as exc:
        print(f"gateway count: {exc}", file=sys.stderr)
        return 1
    config = config or DEFAULTS
    model = args.model or body.get("model")
    if not isinstance(model, str) or not model:
        print("gateway count: the request names no model; pass --model", file=sys.stderr)
        return 2
    problem = request_problem(model, body, config)
    if problem is not None:
        print(f"gateway count: {problem}", file=sys.stderr)
        return 2
    try:
        counter = TokenCounter.build(config.counting, config.models)
    except VocabularyError as exc:
        print(f"gateway count: {exc}", file=sys.stderr)
        return 1
    report = build_report(model, body, config, counter)
    if args.json:
        sys.stdout.write(orjson.dumps(asdict(report), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(render(report))
    return 0


def _read_request(file: str, stdin: BinaryIO) -> dict[str, Any]:
    raw = stdin.read() if file == "-" else Path(file).read_bytes()
    body = orjson.loads(raw)
    if not isinstance(body, dict):
        raise ValueError("the request must be a JSON object")
    return body


def request_problem(model: str, body: dict[str, Any], config: GatewayConfig) -> str | None:
    """Why ``body`` cannot be counted for ``model``: a chat body sent to an embedding model would count
    as an empty input, a silent 0 that looks like an answer."""
    model_config = config.models.get(model)
    if model_config is not None and model_config.kind == "embedding" and "input" not in body:
        return (
            f"{model} is an embedding model: its request has an input (a string, a list of strings or "
            "token arrays), not messages"
        )
    return None


def build_report(
    model: str, body: dict[str, Any], config: GatewayConfig, counter: TokenCounter
) -> CountReport:
    model_config = config.models.get(model)
    kind = model_config.kind if model_config is not None else None
    embedding = kind == "embedding" or ("input" in body and "messages" not in body)
    count = counter.count_embeddings(model, body) if embedding else counter.count_chat(model, body)
    output_tokens = _output_tokens(body)
    bands = build_engine(config).bands.get(model)
    normal, at_cliff, billed_at = _projections(count, output_tokens, model_config)
    return CountReport(
        model=model,
        encoding=count.encoding,
        approximate=count.approximate,
        kind=kind,
        request="embeddings" if embedding else "chat",
        messages=count.messages,
        tools=count.tools,
        images=count.images,
        total=count.total,
        output_tokens=output_tokens,
        band=bands.band_of(count.total).value if bands is not None else None,
        warning_line=bands.warning if bands is not None else None,
        cliff=bands.cliff if bands is not None else None,
        normal=normal,
        at_cliff=at_cliff,
        billed_at=billed_at,
    )


def _output_tokens(body: dict[str, Any]) -> int:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def _projections(
    count: TokenCount, output_tokens: int, model: ModelConfig | None
) -> tuple[Projection | None, Projection | None, str | None]:
    if model is None or model.pricing is None:
        return None, None, None
    usage = Usage(input_tokens=count.total, output_tokens=output_tokens, estimated=True)
    normal = _projection(price_at_tier(usage, model.pricing, None))
    if not model.pricing.tiers:
        return normal, None, "normal"
    at_cliff = _projection(price_at_tier(usage, model.pricing, 0))
    billed_at = "normal" if applicable_tier(count.total, model.pricing.tiers) is None else "cliff"
    return normal, at_cliff, billed_at


def _projection(cost: Cost) -> Projection:
    return Projection(usd=usd(cost.total_nanos), nanos=cost.total_nanos)


def render(report: CountReport) -> str:
    approximate = "  (approximate)" if report.approximate else ""
    part = "input     " if report.request == "embeddings" else "messages  "
    lines = [
        f"model      {report.model}  ({report.encoding}){approximate}",
        f"{part} {report.messages:>12,}",
        f"tools      {report.tools:>12,}",
        f"images     {report.images:>12,}",
        f"total      {report.total:>12,}",
        _band_line(report),
    ]
    lines.append(f"output     {report.output_tokens:>12,}  (max_completion_tokens / max_tokens)")
    if report.normal is None:
        lines.append("cost       unknown: the model has no pricing")
    else:
        lines.append(f"cost       ${report.normal.usd} at the normal price")
        if report.at_cliff is not None:
            lines.append(f"           ${report.at_cliff.usd} at the cliff tier")
        lines.append(f"           billed at the {report.billed_at} price")
    return "\n".join(lines) + "\n"


def _band_line(report: CountReport) -> str:
    if report.kind == "embedding":
        return "band       none: an embedding model (bands and policies are for chat models)"
    if report.band is None:
        return "band       unknown: the model is not in the config"
    return (
        f"band       {report.band.replace('_', ' ')}  "
        f"(warning line {report.warning_line:,}, cliff {report.cliff:,})"
    )
