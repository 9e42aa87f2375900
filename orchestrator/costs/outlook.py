"""A report's period set against what finance compares it with: the period before it (same
length), the month to date, a forecast to the month's end and the month's budget.

The forecast is the month to date plus the recent daily rate (the last seven days, or the
month's days so far if fewer) over the days left: a run rate, which finance can check by hand,
not a model's guess."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from orchestrator.costs.money import cents
from orchestrator.costs.periods import Period, period_containing

DAY = timedelta(days=1)
RATE_WINDOW = timedelta(days=7)
SpentBetween = Callable[[datetime, datetime], Decimal]  # the ledger's total, full precision


@dataclass(frozen=True)
class Outlook:
    previous: Period
    previous_cents: Decimal
    month: Period
    month_to_date_cents: Decimal
    forecast_cents: Decimal  # the whole month, at the recent daily rate
    budget_cents: Decimal | None  # the month's, from the settings

    def change(self, total_cents: Decimal) -> Decimal | None:
        """The period's change against the one before, as a fraction (None: nothing before)."""
        if self.previous_cents == 0:
            return None
        return (total_cents - self.previous_cents) / self.previous_cents

    @property
    def over_budget_cents(self) -> Decimal | None:
        """How far the forecast ends above the budget (negative: below it)."""
        return None if self.budget_cents is None else self.forecast_cents - self.budget_cents


def outlook(
    spent: SpentBetween, period: Period, now: datetime, monthly_budget: Decimal | None
) -> Outlook:
    length = period.until - period.since
    previous = Period(period.kind, period.since - length, period.since)
    until = min(period.until, now)
    month = period_containing("month", until - timedelta(microseconds=1))
    month_to_date = spent(month.since, until)
    window_start = max(month.since, until - RATE_WINDOW)
    window_days = Decimal(str((until - window_start) / DAY))
    recent = spent(window_start, until) if window_days > 0 else Decimal(0)
    daily = recent / window_days if window_days > 0 else Decimal(0)
    days_left = Decimal(str((month.until - until) / DAY))
    return Outlook(
        previous,
        cents(spent(previous.since, previous.until)),
        month,
        cents(month_to_date),
        cents(month_to_date + daily * days_left),
        None if monthly_budget is None else cents(monthly_budget),
    )
