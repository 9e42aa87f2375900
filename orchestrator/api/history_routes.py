"""/v1/history (issue 49): the console's "what happened" page as JSON, for an operator's
scripts and the CLI's `framefleet history`: over a date range in equal buckets, the jobs in
each state, the fleet by market, its price per hour, the interruptions and the deadlines
missed; and the spend per day. /v1/costs/focus: the ledger's FOCUS rows, as the CLI's
`costs export` writes them."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from fastapi import APIRouter, HTTPException
from pydantic import AwareDatetime, BaseModel

from kernel.job_state import JobState
from kernel.market import Market
from orchestrator.api.fleet_routes import checked_range
from orchestrator.api.history import HistoryView, history_view
from orchestrator.api.jobs_routes import ERRORS
from orchestrator.api.ports import ApiServices
from orchestrator.api.security import Operator, Services
from orchestrator.api.views import money
from orchestrator.costs.focus import focus_csv

router = APIRouter(prefix="/v1", tags=["fleet and money"])
DEFAULT_RANGE = timedelta(hours=24)
EXPORT_RANGE = timedelta(days=30)  # as `framefleet costs export`


class HistoryPointOut(BaseModel):
    at: datetime  # the end of the bucket
    jobs: dict[str, int]  # by state, at `at`
    instances: dict[str, int]  # by market, at `at`
    usd_per_hour: str  # the live fleet's price at `at` (a decimal string)
    interruptions: int  # instances gone within the bucket
    deadline_misses: int  # deadlines within the bucket their jobs missed


class DaySpend(BaseModel):
    day: date
    usd: str  # a decimal string


class FocusCsv(BaseModel):
    since: datetime
    until: datetime
    rows: int
    total_usd: str  # a decimal string, the rows' sum
    incomplete: list[str]  # why the period's numbers may be short
    csv: str  # FinOps FOCUS 1.0 rows, as `framefleet costs export` writes them


class HistoryOut(BaseModel):
    since: datetime
    until: datetime
    step_seconds: float
    points: list[HistoryPointOut]
    spend_per_day: list[DaySpend]


def load_history(services: ApiServices, since: datetime, until: datetime) -> HistoryView:
    """The history view over [since, until] from the store's facts (the console's page too)."""
    if services.history is None:
        raise HTTPException(404, "no history in this deployment")
    now = services.clock.now()
    store = services.store
    lives = store.cost_facts.instance_lives(since, until)
    return history_view(
        since,
        until,
        services.history.state_moves_until(until),
        lives,
        store.cost_facts.price_changes([life.pool for life in lives], until),
        store.pages.gone_between(since, until),
        services.history.deadline_outcomes(since, until),
        services.period_costs(since, min(until, now), None)[0].by_day_market,
        now,
    )


@router.get(
    "/history",
    response_model=HistoryOut,
    responses=ERRORS,
    summary="What happened over a range (the last 24 hours by default), in 48 buckets",
)
def history(
    _: Operator,
    services: Services,
    since: AwareDatetime | None = None,
    until: AwareDatetime | None = None,
) -> HistoryOut:
    end = until or services.clock.now()
    start, end = checked_range(since or end - DEFAULT_RANGE, end)
    view = load_history(services, start, end)
    return HistoryOut(
        since=view.since,
        until=view.until,
        step_seconds=view.step.total_seconds(),
        points=[
            HistoryPointOut(
                at=p.at,
                jobs={s.value: p.jobs.get(s, 0) for s in JobState},
                instances={m.value: p.instances.get(m, 0) for m in Market},
                usd_per_hour=money(p.usd_per_hour),
                interruptions=p.interruptions,
                deadline_misses=p.deadline_misses,
            )
            for p in view.points
        ],
        spend_per_day=[DaySpend(day=d, usd=money(usd)) for d, usd in view.spend_per_day],
    )


@router.get(
    "/costs/focus",
    response_model=FocusCsv,
    responses=ERRORS,
    summary="The cost ledger as FinOps FOCUS 1.0 rows (CSV) over since/until (30 days by default)",
)
def focus(
    _: Operator,
    services: Services,
    since: AwareDatetime | None = None,
    until: AwareDatetime | None = None,
) -> FocusCsv:
    if services.focus_export is None:
        raise HTTPException(404, "no cost ledger in this deployment")
    end = until or services.clock.now()
    start, end = checked_range(since or end - EXPORT_RANGE, end)
    export = services.focus_export(start, end)
    return FocusCsv(
        since=start,
        until=end,
        rows=len(export.rows),
        total_usd=money(export.total),
        incomplete=export.incomplete,
        csv=focus_csv(export.rows),
    )
