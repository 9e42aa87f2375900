"""The console's pages for "what happened" (the fleet's operators: tokens of every team): the
history over a date range, the GPUs' health with their quarantines, and the dead letters."""

from __future__ import annotations

from datetime import datetime, timedelta

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from kernel.job_state import JobState
from orchestrator.api.console import Services, Viewer, as_utc, page
from orchestrator.api.fleet_routes import checked_range
from orchestrator.api.history import charts
from orchestrator.api.history_routes import load_history
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
    since, until = date_range(services_.clock.now(), since, until)
    view = load_history(services_, since, until)
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
