"""An export's rows rendered by PostgreSQL: SQL expressions that give, for an archived event, the text
``gateway.ledger.formats`` writes for it, byte for byte: its CSV line (``\\r\\n`` included) or its JSON
object (no line end). The FOCUS rows are ``gateway.ledger.focus_sql``'s.

They read the export columns (``gateway.ledger.archive_schema``), and are right only for a row whose
``plain`` is true: the drainer found the event's columns filled and its text plain (``plain_text``: no
field holding a comma, a quote, a backslash or a control character, none starting with ``= + - @``, so
that nothing needs quoting, escaping or defusing). The gateway renders every other row from its JSON
(``gateway.ledger.archive_export``), so the SQL never has to get those right; they are rare (none of the
gateway's own fields holds such text).

Amounts are ``numeric`` times 10⁻⁹, which prints nine decimals as ``usd`` does; times are ``to_char``
of a timestamp built from whole seconds and milliseconds (exact: no floating point rounds them);
``format('%s', NULL)`` is empty, as a CSV cell of None is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from gateway.ledger.formats import EVENT_COLUMNS, FORMULA_STARTS

TEXT_COLUMNS = (
    "id", "tenant", "key_id", "requested_model", "model", "provider", "action", "tier", "parent_id",
    "client_request_id", "counterfactual_basis", "reason", "tool_uses", "conversation", "band",
)  # fmt: skip
"""Every text field an export writes (``tier`` and after may be NULL)."""
OPTIONAL_TEXT = frozenset(TEXT_COLUMNS[7:])
_SPECIAL = re.compile(r"[\x00-\x1f\",\\]")
"""What a CSV cell quotes (a comma, a quote, a line end), JSON escapes (a quote, a backslash, a control
character), or neither but a plain text column of the archive cannot hold (NUL)."""
_FORMULA = "".join(sorted(set(FORMULA_STARTS) - {"\t", "\r"}))  # (the others are special anyway)
_SPECIAL_BUT_NUL = re.compile(r"[\x01-\x1f\",\\]")
_FORMULA_AFTER_NUL = re.compile("\x00[" + re.escape(_FORMULA) + "]")

Cell = str | Sequence[str]
"""A cell's SQL (its text, NULL for empty), a ``Constant``, or a sequence of both written one after the
other."""


class Constant(str):
    """Text that is the same on every row: written into ``format``'s template."""


def plain_text(values: Iterable[object]) -> bool:
    """Whether text fields need nothing done to them in any export: each is None or a string with no
    ``_SPECIAL`` character, not starting with what a spreadsheet would run as a formula."""
    texts = [value for value in values if value is not None]
    return all(type(text) is str for text in texts) and plain_strings(texts)  # type: ignore[arg-type]


def plain_strings(texts: Sequence[str]) -> bool:
    """``plain_text`` of strings: one look at them all, joined by NUL (which, inside one, the count of NULs
    gives away)."""
    joined = "\x00".join(texts)
    return (
        joined.count("\x00") == max(len(texts) - 1, 0)
        and (not joined or joined[0] not in _FORMULA)
        and not _SPECIAL_BUT_NUL.search(joined)
        and not _FORMULA_AFTER_NUL.search(joined)
    )


def literal(text: str) -> str:
    """``text`` as an SQL string constant (``E'…'``: the same whatever ``standard_conforming_strings``)."""
    escaped = text.replace("\\", "\\\\").replace("'", "\\'").replace("\r", "\\r").replace("\n", "\\n")
    return f"E'{escaped}'"


def usd(nanos: str) -> str:
    """``1234500`` → ``0.001234500`` (NULL stays NULL)."""
    return f"(({nanos})::numeric * 0.000000001)"


def iso_time(time_ms: str) -> str:
    """``2026-11-30T12:00:00.123Z``, as ``gateway.ledger.period.iso_time``."""
    moment = f"{timestamp(f'({time_ms}) / 1000')} + (({time_ms}) % 1000) * interval '1 millisecond'"
    return f"""to_char({moment}, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"""


def timestamp(seconds: str) -> str:
    """The UTC timestamp of whole epoch seconds (exact: a double holds any second before year 20000)."""
    return f"(timestamp '1970-01-01' + ({seconds}) * interval '1 second')"


def flag(column: str) -> str:
    return f"(CASE WHEN {column} THEN 'true' ELSE 'false' END)"


def csv_quoted(text: str) -> str:
    """A CSV cell of text that holds a quote (a JSON object): in quotes, its quotes doubled."""
    return f"""('"' || replace({text}, '"', '""') || '"')"""


def formatted(cells: Sequence[Cell], *, start: str = "", end: str = "") -> str:
    """``format(…)`` writing the cells one after the other, a comma between two, within ``start`` and
    ``end``. An expression in several cells is computed once (``%2$s`` refers to it again)."""
    arguments: list[str] = []
    whole = start.replace("%", "%%") + template(cells, arguments) + end.replace("%", "%%")
    if not arguments:
        return literal(whole.replace("%%", "%"))
    return f"format({literal(whole)}, {', '.join(arguments)})"


def template(cells: Sequence[Cell], arguments: list[str]) -> str:
    """``format``'s template of the cells one after the other, a comma between two: a constant written in
    it, an expression as a reference to ``arguments`` (added there the first time: templates sharing one
    list of arguments are joined into one template of one ``format`` call)."""
    written: list[str] = []
    for cell in cells:
        parts = [cell] if isinstance(cell, str) else cell
        text = ""
        for part in parts:
            if isinstance(part, Constant):
                text += part.replace("%", "%%")
                continue
            if part not in arguments:
                arguments.append(part)
            text += f"%{arguments.index(part) + 1}$s"
        written.append(text)
    return ",".join(written)


def _event_cells() -> dict[str, tuple[str, str]]:
    """Each export column's (kind, SQL value)."""
    cells: dict[str, tuple[str, str]] = {name: ("text", name) for name in TEXT_COLUMNS}
    cells |= {
        name: ("integer", name)
        for name in (
            "input_tokens", "cached_tokens", "output_tokens", "reasoning_tokens", "status", "latency_ms",
            "counterfactual_cached_tokens", "cache_write_tokens",
        )
    }  # fmt: skip
    cells |= {
        "time": ("time", iso_time("time_ms")),
        "cost_usd": ("usd", usd("cost_nanos")),
        "counterfactual_usd": ("usd", usd("counterfactual_nanos")),
        "saving_usd": ("usd", usd("counterfactual_nanos::numeric - cost_nanos")),
        "tool_cost_usd": ("usd", usd("tool_cost_nanos")),
        "input_cost_usd": ("optional usd", usd("input_cost_nanos")),
        "cached_input_cost_usd": ("optional usd", usd("cached_input_cost_nanos")),
        "cache_write_cost_usd": ("optional usd", usd("cache_write_cost_nanos")),
        "output_cost_usd": ("optional usd", usd("output_cost_nanos")),
        "estimated": ("flag", flag("estimated")),
        "stream": ("flag", flag("stream")),
        "tags": ("tags", "tags"),
    }
    return {column: cells[column] for column in EVENT_COLUMNS}


def csv_line() -> str:
    """The event's CSV line, as ``encode_events`` writes it (for a plain row)."""
    cells: list[Cell] = []
    for kind, value in _event_cells().values():
        if kind == "tags":
            value = f"(CASE sorted_tags WHEN '{{}}' THEN '{{}}' ELSE {csv_quoted('sorted_tags')} END)"
        cells.append(value)
    return formatted(cells, end="\r\n")


def json_line() -> str:
    """The event's JSON object, as ``encode_events`` writes it in JSON and NDJSON (for a plain row):
    keys in ``EVENT_COLUMNS`` order, compact, as orjson writes them."""
    cells: list[Cell] = []
    for column, (kind, value) in _event_cells().items():
        key = Constant(f'"{column}":')
        if kind in ("time", "usd") or (kind == "text" and column not in OPTIONAL_TEXT):
            cells.append((Constant(f'"{column}":"'), value, Constant('"')))
        elif kind in ("text", "optional usd"):
            cells.append((key, f"""coalesce('"' || {value} || '"', 'null')"""))
        elif kind == "tags":
            cells.append((key, "coalesce(tags::text, 'null')"))
        else:
            cells.append((key, value))
    return formatted(cells, start="{", end="}")


def segments(
    cells: Mapping[str, Cell], shared: Mapping[str, Cell], columns: Sequence[str]
) -> tuple[dict[str, str], list[Cell]]:
    """Rows that share cells: ``shared`` holds the cells every row of an event has alike, ``cells`` the
    others. Each run of consecutive shared cells is written once per event, as a column of its own
    (``segment_<n>``: the first dict, to compute beforehand), but for a run of one cell, written as it is;
    the second value is a row's cells with each run in one (for ``formatted``)."""
    computed: dict[str, str] = {}
    row: list[Cell] = []
    run: list[Cell] = []

    def close_run() -> None:
        if not run:
            return
        if all(isinstance(cell, Constant) for cell in run):
            row.extend(run)
        elif len(run) == 1:  # one cell: written as it is
            row.append(run[0])
        else:
            name = f"segment_{len(computed)}"
            computed[name] = formatted(run)
            row.append(name)
        run.clear()

    for column in columns:
        if column in shared:
            run.append(shared[column])
        else:
            close_run()
            row.append(cells[column])
    close_run()
    return computed, row
