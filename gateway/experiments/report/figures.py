"""How the experiment report writes its numbers, the same in the verdicts, the text table and the HTML."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

from gateway.base.money import NANOS_PER_USD

CENT_NANOS = NANOS_PER_USD // 100


def dollars(nanos: int | float) -> str:
    """``-$1,234.57``, ``$0.0123``: cents from a cent up, else four significant figures (one request's
    cost is often a fraction of a cent)."""
    value = Decimal(round(nanos)) / NANOS_PER_USD
    sign = "-" if value < 0 else ""
    value = abs(value)
    if value == 0:
        return "$0"
    if value * 100 >= 1:
        return f"{sign}${value.quantize(Decimal('0.01'), rounding=ROUND_HALF_EVEN):,}"
    return f"{sign}${value:.4g}" if value >= Decimal("0.0001") else f"{sign}${value:.2e}"


def times(ratio: float) -> str:
    """``2.1x``, ``0.62x``, ``12x``."""
    if ratio >= 10:
        return f"{ratio:.0f}x"
    return f"{ratio:.1f}x" if ratio >= 1 else f"{ratio:.2f}x"


def change(value: float, reference: float) -> str | None:
    """``+12%``, ``-38%`` of ``value`` against ``reference``; None when the reference is zero."""
    if reference == 0:
        return None
    return f"{value / reference - 1:+.0%}"


def share(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}%}"


def milliseconds(value: float) -> str:
    return f"{value:,.0f} ms" if value >= 10 else f"{value:.1f} ms"


def plain(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
