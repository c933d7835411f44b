"""What a request costs, in integer nano-dollars (1e-9 USD), from its usage and the model's prices.

A price of USD p per million tokens is p x 1000 nano-dollars per token: an integer for any p with up to
three decimals, so untiered costs are exact integers. Tiers multiply rates; when a multiplier makes a
line fractional, each line (input, cached input, output) is computed exactly and rounded half-even to a
whole nano-dollar once, at the end.

Usage conventions (OpenAI's): ``input_tokens`` includes the cached tokens, so ``input - cached`` is billed
at the input price and ``cached`` at the cached price (at the input price, and with the input
multiplier, when the model has no cached price); cached tokens above ``input_tokens`` are clamped to it.
``reasoning_tokens`` are part of ``output_tokens`` and are not billed again.

Cache writes (``usage.cache_write_tokens``, part of the uncached input) cost ``write_multiplier`` times the
input price instead of the input price, when the model's prompt cache bills them (``write_multiplier`` > 0;
GPT-5.6 and later and Anthropic's 5-minute cache: 1.25), under a whole-request tier with its input
multiplier. Of them, ``usage.cache_write_1h_tokens`` (Anthropic's one-hour cache, the only one reported
that way) cost ``write_1h_multiplier`` times the input price (Anthropic's 2 by default) in any case.
Anthropic's cache reads are the cached input, at the model's ``cached_input`` price (0.1x the input).

Tiers (``ModelPricing.tiers``, ascending ``above_input_tokens``): the highest tier whose line the input
tokens exceed (strictly: 272,000 is not above 272,000) applies.

- ``whole_request`` (OpenAI GPT-5.4 and later above 272K; Gemini 2.5 Pro above 200K): every token of the
  request, input, cached and output, at the tier's multipliers.
- ``marginal``: only the input tokens above the line get the tier's input multipliers; the tokens up to
  the line cost what a request of exactly that many tokens would (under the lower tiers). Cached tokens
  are the prompt's prefix (prompt caching caches prefixes), so they sit below the line first. Output
  gets the tier's output multiplier when the input exceeded the line, which is when the tier applies.

Server-side tools (``usage.tool_uses``: web searches, file searches, code interpreter containers, images)
cost their kind's ``per_use`` price each, whatever the tier, in ``Cost.tool_nanos`` (part of the total);
the kinds used that have no price are in ``Cost.unpriced_tools`` (billed $0, for the caller to report).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from gateway.base.money import nanos_from_usd
from gateway.base.types import Usage
from gateway.config.schema.root import ModelPricing, PriceTier
from gateway.money.usage import usage_from_openai

__all__ = [
    "Cost",
    "applicable_tier",
    "nanos_per_token",
    "price",
    "price_at_tier",
    "tool_nanos",
    "usage_from_openai",
]

_NANOS_PER_TOKEN_PER_USD_PER_MILLION = 1000
WRITE_1H_MULTIPLIER = Decimal(2)
"""What a token written to a one-hour cache costs, times the input price (Anthropic's)."""


@dataclass(frozen=True, slots=True)
class Cost:
    total_nanos: int
    input_nanos: int
    """The uncached input tokens."""
    cached_input_nanos: int
    output_nanos: int
    tier: int | None
    """Index into ``ModelPricing.tiers`` of the tier applied, None at the normal price."""
    estimated: bool
    """The usage was counted by the gateway rather than reported by the upstream."""
    tool_nanos: int = 0
    """The server-side tools' uses (part of ``total_nanos``)."""
    cache_write_nanos: int = 0
    """The input tokens written to the provider's cache, their premium included (part of ``input_nanos``;
    their share of the uncached input's amount, so a tier's split over the line is spread evenly)."""
    unpriced_tools: tuple[str, ...] = ()
    """Kinds of tools used that the model's ``per_use`` prices do not list (billed nothing)."""

    @property
    def parts(self) -> tuple[int, int, int, int]:
        """The cost less the tools, by priced unit: uncached input (cache writes apart), cached input,
        cache writes, output (``CostEvent.cost_parts``)."""
        writes = self.cache_write_nanos
        return (self.input_nanos - writes, self.cached_input_nanos, writes, self.output_nanos)


@dataclass(frozen=True, slots=True)
class _Rates:
    input: int
    cached: int
    output: int
    cached_is_input: bool


def nanos_per_token(usd_per_million: Decimal) -> int:
    """Nano-dollars per token for a price in USD per million tokens; exact, else ``ValueError``."""
    nanos = usd_per_million * _NANOS_PER_TOKEN_PER_USD_PER_MILLION
    if nanos != nanos.to_integral_value() or nanos < 0:
        raise ValueError(f"price {usd_per_million} per million is not a whole number of nano-dollars")
    return int(nanos)


def applicable_tier(input_tokens: int, tiers: tuple[PriceTier, ...]) -> int | None:
    """Index of the highest tier whose line ``input_tokens`` exceeds, or None."""
    applied = None
    for index, tier in enumerate(tiers):
        if input_tokens > tier.above_input_tokens:
            applied = index
    return applied


def price(
    usage: Usage,
    pricing: ModelPricing,
    *,
    write_multiplier: Decimal = Decimal(0),
    write_1h_multiplier: Decimal = WRITE_1H_MULTIPLIER,
) -> Cost:
    """The cost of one call."""
    tier = applicable_tier(usage.input_tokens, pricing.tiers)
    return price_at_tier(
        usage, pricing, tier, write_multiplier=write_multiplier, write_1h_multiplier=write_1h_multiplier
    )


def price_at_tier(
    usage: Usage,
    pricing: ModelPricing,
    tier: int | None,
    *,
    write_multiplier: Decimal = Decimal(0),
    write_1h_multiplier: Decimal = WRITE_1H_MULTIPLIER,
) -> Cost:
    """The cost of ``usage`` billed under ``tier`` whatever its size (projections: "at the cliff price")."""
    if (
        min(
            usage.input_tokens,
            usage.cached_input_tokens,
            usage.output_tokens,
            usage.reasoning_tokens,
            usage.cache_write_tokens,
            usage.cache_write_1h_tokens,
        )
        < 0
    ):
        _negative(usage)
    if tier is not None and not 0 <= tier < len(pricing.tiers):
        raise ValueError(f"no tier {tier}; the model has {len(pricing.tiers)}")
    rates = _rates(pricing)
    cached = min(usage.cached_input_tokens, usage.input_tokens)
    uncached_amount, cached_amount = _input(usage.input_tokens - cached, cached, rates, pricing.tiers, tier)
    written = min(usage.cache_write_tokens, usage.input_tokens - cached)
    hour = min(usage.cache_write_1h_tokens, written)
    premium = (
        (written - hour) * (Fraction(write_multiplier) - 1 if write_multiplier else 0)
        + hour * (Fraction(write_1h_multiplier) - 1)
        if written
        else 0
    )  # most calls write nothing: no fractions to build for them (this runs on every request)
    base = uncached_amount
    if premium:
        chosen_tier = pricing.tiers[tier] if tier is not None else None
        scale = (
            Fraction(chosen_tier.input_multiplier)
            if chosen_tier is not None and chosen_tier.scope == "whole_request"
            else Fraction(1)
        )
        uncached_amount += premium * rates.input * scale
    output_amount: Fraction | int = usage.output_tokens * rates.output
    if tier is not None:
        chosen = pricing.tiers[tier]
        if chosen.scope == "whole_request" or usage.input_tokens > chosen.above_input_tokens:
            output_amount *= Fraction(chosen.output_multiplier)
    input_nanos, cached_nanos, output_nanos = (
        round(uncached_amount),
        round(cached_amount),
        round(output_amount),
    )
    uncached = usage.input_tokens - cached
    write_nanos = (
        round(Fraction(base) * written / uncached + (uncached_amount - base)) if written and uncached else 0
    )
    tools, unpriced = tool_nanos(usage.tool_uses, pricing) if usage.tool_uses else (0, ())
    return Cost(
        total_nanos=input_nanos + cached_nanos + output_nanos + tools,
        input_nanos=input_nanos,
        cached_input_nanos=cached_nanos,
        output_nanos=output_nanos,
        tier=tier,
        estimated=usage.estimated,
        tool_nanos=tools,
        cache_write_nanos=min(write_nanos, input_nanos),
        unpriced_tools=unpriced,
    )


def _negative(usage: Usage) -> None:
    """Raise for the first count of ``usage`` below zero."""
    for field in (
        "input_tokens",
        "cached_input_tokens",
        "output_tokens",
        "reasoning_tokens",
        "cache_write_tokens",
        "cache_write_1h_tokens",
    ):
        if getattr(usage, field) < 0:
            raise ValueError(f"usage.{field} is negative")


def tool_nanos(uses: tuple[tuple[str, int], ...], pricing: ModelPricing) -> tuple[int, tuple[str, ...]]:
    """What ``uses`` of server-side tools cost at ``pricing``'s ``per_use`` prices, and the kinds used
    that have no price."""
    total, unpriced = 0, []
    for kind, count in uses:
        if count < 0:
            raise ValueError(f"usage.tool_uses[{kind}] is negative")
        price_per_use = pricing.per_use.get(kind)
        if price_per_use is None:
            unpriced.append(kind)
        else:
            total += count * nanos_from_usd(price_per_use)
    return total, tuple(unpriced)


def _rates(pricing: ModelPricing) -> _Rates:
    return _token_rates(pricing.input, pricing.cached_input, pricing.output)


@functools.lru_cache(maxsize=256)
def _token_rates(input_price: Decimal, cached_price: Decimal | None, output_price: Decimal) -> _Rates:
    """Nano-dollars per token of each kind (computed once per price list: it is on every request)."""
    return _Rates(
        input=nanos_per_token(input_price),
        cached=nanos_per_token(cached_price if cached_price is not None else input_price),
        output=nanos_per_token(output_price),
        cached_is_input=cached_price is None,
    )


def _input(
    uncached: int, cached: int, rates: _Rates, tiers: tuple[PriceTier, ...], tier: int | None
) -> tuple[Fraction | int, Fraction | int]:
    """Exact (uncached, cached) input amounts in nano-dollars under ``tiers[tier]``."""
    if tier is None:
        return uncached * rates.input, cached * rates.cached
    chosen = tiers[tier]
    input_multiplier = Fraction(chosen.input_multiplier)
    cached_multiplier = (
        input_multiplier if rates.cached_is_input else Fraction(chosen.cached_input_multiplier)
    )
    if chosen.scope == "whole_request":
        return uncached * rates.input * input_multiplier, cached * rates.cached * cached_multiplier
    line = chosen.above_input_tokens
    cached_below = min(cached, line)
    uncached_below = max(0, min(cached + uncached, line) - cached_below)
    lower = applicable_tier(cached_below + uncached_below, tiers[:tier])
    below_uncached, below_cached = _input(uncached_below, cached_below, rates, tiers, lower)
    return (
        below_uncached + (uncached - uncached_below) * rates.input * input_multiplier,
        below_cached + (cached - cached_below) * rates.cached * cached_multiplier,
    )
