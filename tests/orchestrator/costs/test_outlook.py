"""A report in finance's terms: the period against the one before, the month to date, a run-rate
forecast to the month's end against the budget, and a negative saving worded as extra cost."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from orchestrator.costs.outlook import outlook
from orchestrator.costs.periods import Period
from orchestrator.costs.report import outlook_rows, savings_line

DAY = timedelta(days=1)
PER_DAY = Decimal("10")  # a steady $10 a day
NOW = datetime(2026, 11, 21, tzinfo=UTC)


def steady(since: datetime, until: datetime) -> Decimal:
    return PER_DAY * Decimal(str((until - since) / DAY))


def test_the_period_before_the_month_to_date_and_the_forecast_to_its_end() -> None:
    week = Period("week", NOW - 7 * DAY, NOW)
    context = outlook(steady, week, NOW, monthly_budget=Decimal("250"))
    assert context.previous == Period("week", NOW - 14 * DAY, NOW - 7 * DAY)
    assert context.previous_cents == Decimal("70.00")
    assert context.change(Decimal("77.00")) == Decimal("0.1")
    assert context.month.label == "month 2026-11"
    assert context.month_to_date_cents == Decimal("200.00")  # 20 days of November
    assert context.forecast_cents == Decimal("300.00")  # and 10 more at the same rate
    assert context.over_budget_cents == Decimal("50.00")


def test_a_period_with_nothing_before_has_no_change() -> None:
    context = outlook(lambda since, until: Decimal(0), Period("day", NOW - DAY, NOW), NOW, None)
    assert context.change(Decimal("5")) is None
    assert context.over_budget_cents is None


def test_a_negative_saving_reads_as_extra_cost() -> None:
    assert savings_line(Decimal("-9.434")) == "Extra cost against on-demand: $9.43"
    assert savings_line(Decimal("12.5")) == "Saved against on-demand: $12.50"


class Stub:
    """The report fields outlook_rows reads."""

    def __init__(self, total: Decimal, budget: Decimal) -> None:
        self.total_cents = total
        self.outlook = outlook(steady, Period("week", NOW - 7 * DAY, NOW), NOW, budget)


def test_the_budget_row_says_over_or_under() -> None:
    over = dict(outlook_rows(Stub(Decimal("70"), Decimal("250"))))  # type: ignore[arg-type]
    under = dict(outlook_rows(Stub(Decimal("70"), Decimal("400"))))  # type: ignore[arg-type]
    assert over["Budget for the month"] == "$250.00; forecast over by $50.00"
    assert under["Budget for the month"] == "$400.00; forecast under by $100.00"
    assert over["Previous period (week 2026-W45 (2026-11-07 to 2026-11-14))"] == (
        "$70.00 (this period +0%)"
    )
