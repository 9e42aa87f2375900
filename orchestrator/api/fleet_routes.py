"""/v1/fleet (the instances alive, their price and jobs) and /v1/costs (the ledger's money
for a period, by category and tag; /v1/costs/groups: by any grouping of the Money page)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query
from pydantic import AwareDatetime, BaseModel

from orchestrator.api.jobs_routes import ERRORS
from orchestrator.api.models import CostsView, FleetView
from orchestrator.api.money_groups import Grouping, grouped
from orchestrator.api.ports import ApiServices, ApiStore
from orchestrator.api.security import Operator, Reader, Services
from orchestrator.api.views import costs_view, fleet_instances, fleet_usd_per_hour, money
from orchestrator.costs.periods import period_containing
from orchestrator.store.cost_facts import InstanceLife

router = APIRouter(prefix="/v1", tags=["fleet and money"])
MAX_PERIOD = timedelta(days=93)


def alive_instances(store: ApiStore, now: datetime) -> list[InstanceLife]:
    """The instances not ended at `now`, as the cost ledger records them."""
    lives = store.cost_facts.instance_lives(now, now + timedelta(seconds=1))
    return [life for life in lives if life.ended_at is None]


def fleet_view(services: ApiServices) -> FleetView:
    store, now = services.store, services.clock.now()
    lives = alive_instances(store, now)
    prices = store.cost_facts.price_changes(
        [life.pool for life in lives], now + timedelta(seconds=1)
    )
    instances = fleet_instances(lives, prices, store.placements())
    gone = store.pages.gone_between(now - timedelta(hours=24), now + timedelta(seconds=1))
    return FleetView(
        instances=instances,
        usd_per_hour=fleet_usd_per_hour(instances),
        interruptions_24h=len(gone),
    )


@router.get("/fleet", response_model=FleetView, responses=ERRORS, summary="The fleet now")
def fleet(_: Operator, services: Services) -> FleetView:
    return fleet_view(services)


def period_bounds(
    services: ApiServices,
    period: Literal["day", "week", "month"],
    since: datetime | None,
    until: datetime | None,
) -> tuple[datetime, datetime]:
    now = services.clock.now()
    if since is None:
        current = period_containing(period, now)
        since, until = current.since, min(current.until, now)
    return checked_range(since, until or now)


def checked_range(since: datetime, until: datetime) -> tuple[datetime, datetime]:
    """A range the API and the console read: `since` before `until`, at most 93 days."""
    if until <= since or until - since > MAX_PERIOD:
        raise HTTPException(400, "since must be before until, at most 93 days apart")
    return since, until


@router.get(
    "/costs",
    response_model=CostsView,
    responses=ERRORS,
    summary="Spend, waste and savings for a period (the current day, week or month so far, "
    "or since/until)",
)
def costs(
    caller: Reader,
    services: Services,
    period: Literal["day", "week", "month"] = "day",
    since: AwareDatetime | None = None,
    until: AwareDatetime | None = None,
    tag: Annotated[Literal["team", "customer", "project"] | None, Query()] = None,
) -> CostsView:
    start, end = period_bounds(services, period, since, until)
    summary, incomplete = services.period_costs(start, end, caller.team_list())
    view = costs_view(summary, incomplete)
    if tag is not None:
        view = view.model_copy(update={"by_tag": [t for t in view.by_tag if t.tag == tag]})
    return view


class MoneyGroup(BaseModel):
    group: str
    usd: str  # cents, allocated once at the line items (a decimal string)


class MoneyGroups(BaseModel):
    since: datetime
    until: datetime
    by: str
    total_usd: str
    groups: list[MoneyGroup]  # largest first (by day: in order); they add up to the total
    incomplete: list[str]


@router.get(
    "/costs/groups",
    response_model=MoneyGroups,
    responses=ERRORS,
    summary="Spend for a period by team, project, customer, model, pool, market or day "
    "(the console's Money page)",
)
def cost_groups(
    caller: Reader,
    services: Services,
    by: Grouping = "team",
    period: Literal["day", "week", "month"] = "day",
    since: AwareDatetime | None = None,
    until: AwareDatetime | None = None,
) -> MoneyGroups:
    start, end = period_bounds(services, period, since, until)
    summary, incomplete = services.period_costs(start, end, caller.team_list())
    return MoneyGroups(
        since=start,
        until=end,
        by=by,
        total_usd=money(summary.total),
        groups=[MoneyGroup(group=name, usd=money(usd)) for name, usd in grouped(summary, by)],
        incomplete=incomplete,
    )
