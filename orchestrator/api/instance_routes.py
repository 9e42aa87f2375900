"""/v1/instances/{id} (issue 49): an instance's record and its history, and an operator's ask
to drain it (what runs there goes on to its end; nothing new goes there) or to take it back
(what runs there checkpoints and moves now). Either way the control plane empties it and the
autoscaler terminates it, as in a scale-in: the API never calls EC2 itself."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path
from pydantic import BaseModel

from kernel.job_record import DrainKind
from orchestrator.api.auth import Caller
from orchestrator.api.fleet_routes import alive_instances
from orchestrator.api.jobs_routes import ERRORS
from orchestrator.api.ports import ApiServices
from orchestrator.api.security import Administrator, Operator, Services

router = APIRouter(prefix="/v1", tags=["fleet and money"])
InstanceId = Annotated[str, Path(pattern=r"^i-[0-9a-f]{8,17}$")]


class InstanceMove(BaseModel):
    at: datetime
    from_state: str | None
    to_state: str
    actor: str
    reason: str


class InstanceRecord(BaseModel):
    instance_id: str
    alive: bool  # EC2 lists it and it has not ended
    state: str | None  # its record's latest state (None: none recorded yet)
    history: list[InstanceMove]


class DrainAsked(BaseModel):
    instance_id: str
    kind: str  # "rebalance": its jobs go on to their end; "scale-in": they move now


def instance_record(services: ApiServices, instance_id: str) -> InstanceRecord:
    alive = any(
        life.instance_id == instance_id
        for life in alive_instances(services.store, services.clock.now())
    )
    history = services.store.instance_records.instance_history(instance_id)
    if not alive and not history:
        raise HTTPException(404, f"no instance {instance_id!r} in the fleet's records")
    return InstanceRecord(
        instance_id=instance_id,
        alive=alive,
        state=history[-1].after.value if history else None,
        history=[
            InstanceMove(
                at=c.at,
                from_state=c.before.value if c.before else None,
                to_state=c.after.value,
                actor=c.actor,
                reason=c.reason,
            )
            for c in history
        ],
    )


@router.get(
    "/instances/{instance_id}",
    response_model=InstanceRecord,
    responses=ERRORS,
    summary="An instance's record and history",
)
def get_instance(instance_id: InstanceId, _: Operator, services: Services) -> InstanceRecord:
    return instance_record(services, instance_id)


@router.post(
    "/instances/{instance_id}/drain",
    status_code=202,
    response_model=DrainAsked,
    responses=ERRORS,
    summary="Drain an instance: its jobs finish, nothing new goes there, then it is terminated",
)
def drain(instance_id: InstanceId, caller: Administrator, services: Services) -> DrainAsked:
    return _ask(services, caller, instance_id, DrainKind.REBALANCE)


@router.post(
    "/instances/{instance_id}/terminate",
    status_code=202,
    response_model=DrainAsked,
    responses=ERRORS,
    summary="Take an instance back: its jobs checkpoint and move now, then it is terminated",
)
def terminate(instance_id: InstanceId, caller: Administrator, services: Services) -> DrainAsked:
    return _ask(services, caller, instance_id, DrainKind.SCALE_IN)


def _ask(services: ApiServices, caller: Caller, instance_id: str, kind: DrainKind) -> DrainAsked:
    if not instance_record(services, instance_id).alive:
        raise HTTPException(404, f"instance {instance_id!r} is not alive")
    records = services.store.instance_records
    records.ask_to_drain(
        [instance_id],
        f"asked over the API ({kind.value})",
        kind,
        actor=f"operator token {caller.token_id}",
    )
    # An instance asked twice keeps its first request: the answer says which holds.
    asked = records.drain_requests().get(instance_id)
    return DrainAsked(instance_id=instance_id, kind=(asked.kind if asked else kind).value)
