"""Colours a colour-blind reader tells apart (Okabe and Ito's eight), in an order that keeps neighbours
distinct; every chart also names its series in words and has a table beside it."""

from __future__ import annotations

SERIES = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
OTHER = "#999999"
"""The series past the palette, summed as one."""
INK = "#1a1a1a"
MUTED = "#555555"
GRID = "#d0d0d0"


def colour(index: int) -> str:
    return SERIES[index] if index < len(SERIES) else OTHER
