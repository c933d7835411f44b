"""Amounts and counts as the page writes them: money exact to the nano-dollar (``$0.0012345``), with
thousands separated; axis labels rounded."""

from __future__ import annotations

from gateway.base.money import NANOS_PER_USD, usd


def dollars(nanos: int, *, short: bool = False) -> str:
    """``$1,234.50`` exact (trailing zeros past the cents dropped); ``short``: rounded for an axis."""
    if short and abs(nanos) >= NANOS_PER_USD // 100:
        return f"${nanos / NANOS_PER_USD:,.2f}"
    exact = usd(nanos, trim=True)
    sign, digits = ("-", exact[1:]) if exact.startswith("-") else ("", exact)
    whole, _, fraction = digits.partition(".")
    return f"{sign}${int(whole):,}.{fraction}"


def count(number: int) -> str:
    return f"{number:,}"


def share(part: int, whole: int) -> str:
    return "-" if whole <= 0 else f"{100 * part / whole:.1f}%"
