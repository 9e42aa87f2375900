"""The periods reports and the console cover: a day, an ISO week, a month (UTC), or any span."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

PeriodKind = Literal["day", "week", "month", "custom"]
TIME_ZONE = "UTC"  # every period, day and time in a report


@dataclass(frozen=True)
class Period:
    kind: PeriodKind
    since: datetime
    until: datetime

    @property
    def label(self) -> str:
        if self.kind == "day":
            return f"day {self.since:%Y-%m-%d}"
        if self.kind == "week":
            return f"week {self.since:%G-W%V} ({self.since:%Y-%m-%d} to {self.until:%Y-%m-%d})"
        if self.kind == "month":
            return f"month {self.since:%Y-%m}"
        return f"{self.since:%Y-%m-%d %H:%M} to {self.until:%Y-%m-%d %H:%M}"


def period_containing(kind: PeriodKind, moment: datetime) -> Period:
    day = datetime(moment.year, moment.month, moment.day, tzinfo=UTC)
    if kind == "day":
        return Period(kind, day, day + timedelta(days=1))
    if kind == "week":  # ISO weeks: Monday to Monday
        monday = day - timedelta(days=day.weekday())
        return Period(kind, monday, monday + timedelta(days=7))
    if kind == "month":
        first = day.replace(day=1)
        after = datetime(first.year + first.month // 12, first.month % 12 + 1, 1, tzinfo=UTC)
        return Period(kind, first, after)
    raise ValueError(f"no calendar period of kind {kind}")


def last_complete(kind: PeriodKind, now: datetime) -> Period:
    """The newest period of this kind that has ended by `now`."""
    current = period_containing(kind, now)
    return period_containing(kind, current.since - timedelta(seconds=1))
