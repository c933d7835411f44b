"""Calendar arithmetic of the ledger: UTC days and months of epoch milliseconds, and query periods."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache

MS_PER_DAY = 86_400_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_ORDINAL = _EPOCH.toordinal()


def day_of(time_ms: int) -> str:
    """``2026-11-30`` for any instant of that UTC day."""
    return date.fromordinal(_EPOCH_ORDINAL + time_ms // MS_PER_DAY).isoformat()


def month_of(time_ms: int) -> str:
    """``2026-11`` for any instant of that UTC month."""
    return day_of(time_ms)[:7]


def to_ms(moment: datetime) -> int:
    """Exact epoch milliseconds (floored); a naive datetime is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def iso_time(time_ms: int) -> str:
    """``2026-11-30T12:00:00.123Z``. The day's part is made once per day (exports write it for every
    event); the time of day is arithmetic."""
    day, in_day = divmod(time_ms, MS_PER_DAY)
    hours, in_hour = divmod(in_day, 3_600_000)
    minutes, in_minute = divmod(in_hour, 60_000)
    seconds, millis = divmod(in_minute, 1000)
    return f"{_day_prefix(day)}{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}Z"


@lru_cache(maxsize=64)
def _day_prefix(day: int) -> str:
    return date.fromordinal(_EPOCH_ORDINAL + day).isoformat() + "T"


def _month_start(year: int, month: int) -> date:
    year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
    return date(year, month, 1)


def month_expiry(month: str, *, retention_months: int) -> int:
    """Unix seconds at which a month's keys expire: the end of the month plus the retention."""
    year, number = int(month[:4]), int(month[5:7])
    end = _month_start(year, number + 1 + retention_months)
    return int(datetime.combine(end, time(), UTC).timestamp())


@dataclass(frozen=True, slots=True)
class Period:
    """A half-open span of time ``[start_ms, end_ms)``."""

    start_ms: int
    end_ms: int

    def __post_init__(self) -> None:
        if self.end_ms <= self.start_ms:
            raise ValueError("a period must end after it starts")

    def months(self) -> list[str]:
        first, last = day_of(self.start_ms), day_of(self.end_ms - 1)
        year, month = int(first[:4]), int(first[5:7])
        months = []
        while (current := f"{year:04d}-{month:02d}") <= last[:7]:
            months.append(current)
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)
        return months

    def days(self) -> list[str]:
        first = self.start_ms // MS_PER_DAY
        last = (self.end_ms - 1) // MS_PER_DAY
        return [day_of(number * MS_PER_DAY) for number in range(first, last + 1)]

    @classmethod
    def parse(cls, start: str | None, end: str | None, *, now_ms: int) -> Period:
        """Dates (``2026-11-01``) or ISO datetimes (UTC unless an offset is given).

        A date as ``end`` includes that whole day; a datetime as ``end`` is exclusive. Defaults: from the
        start of the current month to now.
        """
        start_ms = _parse_bound(start, inclusive_end=False) if start else _first_of_month(now_ms)
        end_ms = _parse_bound(end, inclusive_end=True) if end else now_ms + 1
        return cls(start_ms, end_ms)


def _first_of_month(now_ms: int) -> int:
    today = date.fromisoformat(day_of(now_ms))
    return to_ms(datetime.combine(today.replace(day=1), time(), UTC))


def _parse_bound(text: str, *, inclusive_end: bool) -> int:
    text = text.strip()
    if len(text) == 10:
        day = date.fromisoformat(text)
        if inclusive_end:
            day += timedelta(days=1)
        return to_ms(datetime.combine(day, time(), UTC))
    return to_ms(datetime.fromisoformat(text.replace("Z", "+00:00")))
