"""Today's spend as the autoscaler's budget sees it, accrued from its instances' prices."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass
class Spend:
    """Dollars spent today, accrued from the instances' prices as time passes."""

    day: str = ""
    dollars: float = 0.0
    last: datetime | None = None

    def accrue(self, now: datetime, hourly: float) -> float:
        if self.last is not None and now.strftime("%Y-%m-%d") == self.day:
            self.dollars += hourly * (now - self.last).total_seconds() / 3600
        else:
            self.day, self.dollars = now.strftime("%Y-%m-%d"), 0.0
        self.last = now
        return self.dollars
