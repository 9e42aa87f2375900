"""The console's pages for "what happened" (the fleet's operators: tokens of every team): the
history over a date range, the GPUs' health with their quarantines, and the dead letters."""

from __future__ import annotations

from datetime import datetime, timedelta

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse

from kernel.job_state import JobState
from orchestrator.api.console import Services, Viewer, as_utc, page
from orchestrator.api.fleet_routes import checked_range
from orchestrator.api.history import charts, history_view
from orchestrator.api.security import every_team

router = APIRouter(prefix="/console", include_in_schema=False)
DEFAULT_RANGE = timedelta(hours=24)


def date_range(
    now: datetime, since: datetime | None, until: datetime | None
) -> tuple[datetime, datetime]:
    """The range asked for (naive moments are UTC), the last 24 hours by default."""
    until = as_utc(until) or now
    return checked_range(as_utc(since) or until - DEFAULT_RANGE, until)


@router.get("/history")
def history_page(
    request: Request,
    caller: Viewer,
    services_: Services,
    since: datetime | None = None,
    until: datetime | None = None,
) -> HTMLResponse:
    every_team(caller)
    if services_.history is None:
        raise HTTPException(404, "no history in this deployment")
    now = services_.clock.now()
    since, until = date_range(now, since, until)
    store = services_.store
    lives = store.cost_facts.instance_lives(since, until)
    view = history_view(
        since,
        until,
        services_.history.state_moves_until(until),
        lives,
        store.cost_facts.price_changes([life.pool for life in lives], until),
        store.pages.gone_between(since, until),
        services_.history.deadline_outcomes(since, until),
        services_.period_costs(since, min(until, now), None)[0].by_day_market,
        now,
    )
    return page(
        request,
        "history.html",
        caller,
        history=view,
        charts=charts(view),
        states=list(JobState),
    )


@router.get("/gpus")
def gpus_page(request: Request, caller: Viewer, services_: Services) -> HTMLResponse:
    every_team(caller)
    store = services_.store
    faults = sorted(store.faults.gpu_faults(), key=lambda fault: fault.at, reverse=True)
    quarantined = sorted(store.faults.quarantined_gpus())
    return page(request, "gpus.html", caller, faults=faults[:500], quarantined=quarantined)


@router.get("/dead-letters")
def dead_letters_page(request: Request, caller: Viewer, services_: Services) -> HTMLResponse:
    every_team(caller)
    letters = services_.dead_letters() if services_.dead_letters is not None else None
    return page(request, "dead_letters.html", caller, letters=letters)
