"""/v1/events: server-sent events for live views. Job moves come from the store's job
history (every replica sees every move, whoever made it), so a reconnecting client names the
last one it saw (`Last-Event-ID`) and misses nothing; launches and instance ends are what
changed in the fleet since the stream's last look."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.sse import EventSourceResponse, ServerSentEvent

from kernel.job_record import JobEvent
from orchestrator.api.auth import Caller
from orchestrator.api.fleet_routes import alive_instances
from orchestrator.api.models import HistoryLine
from orchestrator.api.ports import ApiServices
from orchestrator.api.security import Reader, Services
from orchestrator.store.cost_facts import InstanceLife

router = APIRouter(prefix="/v1", tags=["events"])
KEEPALIVE_SECONDS = 15.0
BACKLOG = 500  # job moves sent per read: a client far behind catches up in steps
MAX_EVENT_ID = 2**63 - 1  # the store's ids are BIGINT: a larger one is a 422, not a 500


def job_event(event_id: int, event: JobEvent) -> ServerSentEvent:
    line = HistoryLine.model_validate(event).model_dump(mode="json")  # as GET /v1/jobs/{id}
    return ServerSentEvent(event="job", id=str(event_id), data={"job_id": event.job_id, **line})


def instance_event(kind: str, life: InstanceLife, reason: str | None = None) -> ServerSentEvent:
    instance_type, zone, market = life.pool
    data = {
        "instance_id": life.instance_id,
        "instance_type": instance_type,
        "availability_zone": zone,
        "market": market.value,
        "at": (life.ended_at or life.launched_at).isoformat(),
    }
    if reason is not None:
        data["reason"] = reason
    return ServerSentEvent(event=kind, data=data)


class FleetWatch:
    """The instances alive at the last look; each look says what launched and what ended."""

    def __init__(self, services: ApiServices) -> None:
        self._services = services
        self._alive: dict[str, InstanceLife] | None = None

    def look(self) -> list[ServerSentEvent]:
        store, now = self._services.store, self._services.clock.now()
        alive = {life.instance_id: life for life in alive_instances(store, now)}
        before, self._alive = self._alive, alive
        if before is None:
            return []
        events = [instance_event("launch", life) for i, life in alive.items() if i not in before]
        ended = [life for i, life in before.items() if i not in alive]
        if ended:
            gone = {
                g.instance_id: g for g in store.pages.gone_between(now - timedelta(hours=1), now)
            }
            for life in ended:
                why = gone.get(life.instance_id)
                kind = "interruption" if why and "interrupt" in why.reason.lower() else "ended"
                events.append(instance_event(kind, life, why.reason if why else None))
        return events


def seen_by(services: ApiServices, caller: Caller, moves: list[tuple[int, JobEvent]]) -> set[str]:
    """The jobs among these moves that are the caller's teams' to see."""
    if caller.teams is None:
        return {event.job_id for _, event in moves}
    jobs = services.store.find_many(list({event.job_id for _, event in moves}))
    return {job_id for job_id, job in jobs.items() if caller.sees(job.spec.tags.team)}


async def stream(
    services: ApiServices, caller: Caller, after: int | None
) -> AsyncIterator[ServerSentEvent]:
    """Job moves of the caller's teams' jobs; instances' launches and ends only for a token of
    every team (the fleet is everyone's)."""
    store = services.store
    last = after if after is not None else await run_in_threadpool(store.pages.last_job_event_id)
    fleet = FleetWatch(services) if caller.teams is None else None
    if fleet is not None:
        await run_in_threadpool(fleet.look)
    yield ServerSentEvent(comment="connected", retry=2000)
    quiet = 0.0
    while True:
        moves = await run_in_threadpool(store.pages.job_events_after, last, BACKLOG)
        shown = await run_in_threadpool(seen_by, services, caller, moves) if moves else set()
        for event_id, event in moves:
            if event.job_id in shown:
                yield job_event(event_id, event)
            last = event_id
        changes = await run_in_threadpool(fleet.look) if fleet is not None else []
        for change in changes:
            yield change
        quiet = 0.0 if moves or changes else quiet + services.settings.event_poll_seconds
        if quiet >= KEEPALIVE_SECONDS:
            yield ServerSentEvent(comment="keepalive")
            quiet = 0.0
        if len(moves) < BACKLOG:
            await asyncio.sleep(services.settings.event_poll_seconds)


def stream_allowed(request: Request, caller: Reader, services: Services) -> Caller:
    """Each open stream reads the store every poll: a token may hold only a few at once. Checked
    before the response starts (after it, a refusal could only break the connection)."""
    open_streams: Counter[str] = request.app.state.open_streams
    if open_streams[caller.token_id] >= services.settings.max_streams_per_token:
        raise HTTPException(
            429, "this token has as many event streams open as it may", headers={"Retry-After": "5"}
        )
    return caller


@router.get(
    "/events",
    response_class=EventSourceResponse,
    summary="Live events: `job` (a job moved), `launch`, `interruption`, `ended` (instances)",
    responses={429: {"description": "over the rate, or too many streams open for the token"}},
)
async def events(
    request: Request,
    caller: Annotated[Caller, Depends(stream_allowed)],
    services: Services,
    last_event_id: Annotated[int | None, Header(ge=0, le=MAX_EVENT_ID)] = None,
    after: Annotated[
        int | None, Query(ge=0, le=MAX_EVENT_ID, description="a job event id to resume after")
    ] = None,
) -> AsyncIterator[ServerSentEvent]:
    open_streams: Counter[str] = request.app.state.open_streams
    open_streams[caller.token_id] += 1
    try:
        resume = after if after is not None else last_event_id
        async for event in stream(services, caller, resume):
            yield event
    finally:
        open_streams[caller.token_id] -= 1
