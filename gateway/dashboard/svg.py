"""Charts drawn on the server as SVG: no script, no library, nothing fetched; each has a title, a
description and a ``<title>`` per mark (its exact value), and prints as it shows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from gateway.dashboard.palette import GRID, INK, MUTED, OTHER, SERIES, colour
from gateway.dashboard.text import dollars

WIDTH = 1120
FONT = 'font-family="system-ui, sans-serif"'


@dataclass(frozen=True, slots=True)
class Bar:
    label: str
    value: int
    text: str
    """The value as shown (money, a count)."""


def _nice_top(value: int) -> int:
    """The smallest 1, 2 or 5 x 10^n at or above ``value`` (1 for nothing)."""
    if value <= 0:
        return 1
    step = 1
    while True:
        for factor in (1, 2, 5):
            if step * factor >= value:
                return step * factor
        step *= 10


def stacked_days(
    days: Sequence[str],
    series: Sequence[str],
    values: dict[str, dict[str, int]],
    *,
    title: str,
    chart_id: str,
) -> str:
    """Cost per day (nano-dollars), one bar a day, stacked by ``series`` (the last may be ``other``)."""
    height, left, right, top, bottom = 300, 84, 16, 16, 40
    plot_w, plot_h = WIDTH - left - right, height - top - bottom
    highest = max((sum(values.get(day, {}).values()) for day in days), default=0)
    scale_top = _nice_top(highest)
    parts = [_open(WIDTH, height + 24 * ((len(series) + 3) // 4), title, chart_id)]
    for step in range(5):
        amount = scale_top * step // 4
        y = top + plot_h - plot_h * step / 4
        parts.append(f'<line x1="{left}" x2="{WIDTH - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="{GRID}"/>')
        parts.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="12" fill="{MUTED}" {FONT}>'
            f"{escape(dollars(amount, short=True))}</text>"
        )
    slot = plot_w / max(1, len(days))
    bar_w = max(2.0, min(48.0, slot * 0.7))
    label_every = max(1, len(days) // 15)
    for number, day in enumerate(days):
        x = left + slot * number + (slot - bar_w) / 2
        base = float(top + plot_h)
        for index, name in enumerate(series):
            amount = values.get(day, {}).get(name, 0)
            if amount <= 0:
                continue
            h = plot_h * amount / scale_top
            base -= h
            fill = OTHER if name == "other" else colour(index)
            parts.append(
                f'<rect x="{x:.1f}" y="{base:.1f}" width="{bar_w:.1f}" height="{h:.1f}" fill="{fill}">'
                f"<title>{escape(day)} · {escape(name)}: {escape(dollars(amount))}</title></rect>"
            )
        if number % label_every == 0:
            parts.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{top + plot_h + 16}" text-anchor="middle" font-size="12" '
                f'fill="{INK}" {FONT}>{escape(day[5:])}</text>'
            )
    parts.append(_legend(series, y=height))
    parts.append("</svg>")
    return "".join(parts)


def bars(rows: Sequence[Bar], *, title: str, chart_id: str, limit: int | None = None) -> str:
    """Horizontal bars, one per row, labelled with the row's name and value; ``limit`` draws a line (a
    budget) at that value."""
    row_h, left, right = 28, 200, 180
    height = row_h * max(1, len(rows)) + 12
    top_value = max([row.value for row in rows] + [limit or 0, 1])
    plot_w = WIDTH - left - right
    parts = [_open(WIDTH, height, title, chart_id)]
    for number, row in enumerate(rows):
        y = 6 + number * row_h
        w = plot_w * max(0, row.value) / top_value
        parts.append(
            f'<text x="{left - 8}" y="{y + 17}" text-anchor="end" font-size="13" fill="{INK}" {FONT}>'
            f"{escape(_clip(row.label))}</text>"
            f'<rect x="{left}" y="{y + 3}" width="{w:.1f}" height="{row_h - 8}" fill="{SERIES[0]}">'
            f"<title>{escape(row.label)}: {escape(row.text)}</title></rect>"
            f'<text x="{left + w + 6:.1f}" y="{y + 17}" font-size="13" fill="{INK}" {FONT}>'
            f"{escape(row.text)}</text>"
        )
    if limit:
        x = left + plot_w * limit / top_value
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="0" y2="{height}" stroke="{INK}" stroke-dasharray="4 3"/>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _open(width: int, height: int, title: str, chart_id: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
        f'role="img" aria-labelledby="{chart_id}-title" id="{chart_id}">'
        f'<title id="{chart_id}-title">{escape(title)}</title>'
    )


def _legend(series: Sequence[str], *, y: int) -> str:
    parts = []
    for index, name in enumerate(series):
        column, line = index % 4, index // 4
        x, top = 84 + column * 260, y + line * 24
        fill = OTHER if name == "other" else colour(index)
        parts.append(
            f'<rect x="{x}" y="{top}" width="14" height="14" fill="{fill}"/>'
            f'<text x="{x + 20}" y="{top + 12}" font-size="13" fill="{INK}" {FONT}>'
            f"{escape(_clip(name, 34))}</text>"
        )
    return "".join(parts)


def _clip(text: str, length: int = 26) -> str:
    return text if len(text) <= length else text[: length - 1] + "…"
