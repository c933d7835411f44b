"""Money at the edges: integer nano-dollars inside, exact decimal USD strings outside (never floats).

A leaf module (standard library only): pricing, the ledger, the metrics and the CLI all use it."""

from __future__ import annotations

from decimal import Decimal

NANOS_PER_USD = 10**9


def usd(nanos: int, *, trim: bool = False) -> str:
    """``1_234_500`` → ``"0.001234500"``; ``trim`` drops trailing zeros, keeping two: ``"0.0012345"``."""
    if nanos == 0 and not trim:  # most of an export's amounts (tools, cache writes, side calls' savings)
        return "0.000000000"
    sign = "-" if nanos < 0 else ""
    whole, fraction = divmod(abs(nanos), NANOS_PER_USD)
    digits = f"{fraction:09d}"
    if trim:
        digits = digits.rstrip("0").ljust(2, "0")
    return f"{sign}{whole}.{digits}"


def nanos_from_usd(amount: Decimal | str | int) -> int:
    """Exact conversion; raises ``ValueError`` when the amount has more than nine decimals."""
    value = Decimal(amount) * NANOS_PER_USD
    if value != value.to_integral_value():
        raise ValueError(f"{amount} USD is not a whole number of nano-dollars")
    return int(value)
