"""Parse, screen and classify EC2 events delivered by EventBridge (pure).

parse -> screen -> classify -> act -> delete the SQS message only after the action is durable.
Unknown events are no-ops; unparseable ones are dead-lettered. AWS Health's scheduled changes to
EC2 are read too: one may name several instances. The parser is total: any body gives instance
events, an IgnoredEvent or an UnparseableEvent, never another exception
(pydantic in strict mode validates every field before it is used; the JSON parser bounds
nesting and number sizes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernel.errors import FrameFleetError
from kernel.instance_types import INSTANCE_ID_PATTERN
from kernel.outside_text import first_problem, printable

SPOT_WARNING = "EC2 Spot Instance Interruption Warning"
REBALANCE = "EC2 Instance Rebalance Recommendation"
STATE_CHANGE = "EC2 Instance State-change Notification"
# AWS Health: a scheduled change to EC2 (an instance's host retired or under maintenance).
HEALTH_EVENT = "AWS Health Event"
MAX_AFFECTED_INSTANCES = 1000
# EventBridge events are at most 256 KB; EC2's are a few hundred bytes.
MAX_EVENT_BYTES = 256 * 1024


class UnparseableEvent(FrameFleetError):
    pass


class InstanceEventKind(StrEnum):
    SPOT_WARNING = "spot_warning"
    REBALANCE = "rebalance"
    STATE_CHANGE = "state_change"
    SCHEDULED_CHANGE = "scheduled_change"


@dataclass(frozen=True)
class InstanceEvent:
    event_id: str
    kind: InstanceEventKind
    instance_id: str
    time: datetime
    region: str
    # terminate | stop | hibernate (spot warning); the event type code (AWS Health)
    action: str | None = None
    state: str | None = None  # pending | running | stopping | stopped | shutting-down | terminated


@dataclass(frozen=True)
class IgnoredEvent:
    event_id: str
    reason: str


class Response(StrEnum):
    # Stop assigning to the instance, checkpoint its jobs now, move them when durable, and mark
    # the (type, AZ, spot) pool as recently interrupted.
    CHECKPOINT_AND_MOVE = "checkpoint_and_move"
    # A rebalance recommendation: no new work there; the autoscaler may replace it early.
    STOP_ASSIGNING = "stop_assigning"
    # The instance is going or gone without (further) notice: resume its jobs elsewhere from
    # their newest durable checkpoint.
    INSTANCE_GONE = "instance_gone"
    NOTHING = "nothing"


class _Envelope(BaseModel):
    """The EventBridge envelope; AWS may add fields, so extras are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)
    id: str = Field(default="", max_length=256)
    source: str = Field(default="", max_length=256)
    detail_type: str = Field(default="", alias="detail-type", max_length=256)
    time: str = Field(default="", max_length=64)
    region: str = Field(default="", max_length=64)
    detail: dict[str, Any]


class _Detail(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)
    instance_id: str = Field(alias="instance-id", pattern=INSTANCE_ID_PATTERN)


class _SpotWarningDetail(_Detail):
    instance_action: Literal["terminate", "stop", "hibernate"] = Field(alias="instance-action")


class _StateChangeDetail(_Detail):
    state: str = Field(min_length=1, max_length=32)


class _HealthEntity(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)
    value: str = Field(alias="entityValue", max_length=256)


class _HealthDetail(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)
    service: str = Field(max_length=64)
    category: str = Field(alias="eventTypeCategory", max_length=64)
    code: str = Field(default="", alias="eventTypeCode", max_length=256)
    entities: list[_HealthEntity] = Field(
        default_factory=list, alias="affectedEntities", max_length=MAX_AFFECTED_INSTANCES
    )


_KINDS: dict[str, tuple[InstanceEventKind, type[_Detail]]] = {
    SPOT_WARNING: (InstanceEventKind.SPOT_WARNING, _SpotWarningDetail),
    REBALANCE: (InstanceEventKind.REBALANCE, _Detail),
    STATE_CHANGE: (InstanceEventKind.STATE_CHANGE, _StateChangeDetail),
}
_GONE_STATES = {"stopping", "stopped", "shutting-down", "terminated"}


def parse_events(body: str | bytes) -> tuple[InstanceEvent, ...] | IgnoredEvent:
    """The instance events in one message: an EC2 event names one instance; an AWS Health
    scheduled change to EC2 may name several, each then acted on like a rebalance."""
    envelope = _envelope(body)
    if envelope.source == "aws.health" and envelope.detail_type == HEALTH_EVENT:
        return _health_events(envelope)
    event = _ec2_event(envelope)
    return event if isinstance(event, IgnoredEvent) else (event,)


def _health_events(envelope: _Envelope) -> tuple[InstanceEvent, ...] | IgnoredEvent:
    try:
        detail = _HealthDetail.model_validate(envelope.detail, strict=True)
    except ValidationError as error:
        where, _ = first_problem(error)
        raise UnparseableEvent(f"{HEALTH_EVENT} without a valid {where}") from None
    if detail.service != "EC2" or detail.category != "scheduledChange":
        what = f"{printable(detail.service, 64)} {printable(detail.category, 64)}"
        return IgnoredEvent(envelope.id, f"not handled: AWS Health {what}")
    time = _event_time(envelope, HEALTH_EVENT)
    named = (entity.value for entity in detail.entities)
    instances = [value for value in named if re.fullmatch(INSTANCE_ID_PATTERN, value)]
    if not instances:
        return IgnoredEvent(envelope.id, "AWS Health scheduled change names no instance")
    return tuple(
        InstanceEvent(
            event_id=envelope.id,
            kind=InstanceEventKind.SCHEDULED_CHANGE,
            instance_id=instance_id,
            time=time,
            region=envelope.region,
            action=printable(detail.code, 128) or None,
        )
        for instance_id in dict.fromkeys(instances)
    )


def _envelope(body: str | bytes) -> _Envelope:
    if len(body) > MAX_EVENT_BYTES:
        raise UnparseableEvent(f"event of {len(body)} bytes is over {MAX_EVENT_BYTES}")
    try:
        envelope = _Envelope.model_validate_json(body, strict=True)
    except ValidationError as error:
        where, what = first_problem(error)
        if what.startswith("Invalid JSON"):
            raise UnparseableEvent(f"not JSON: {what}") from None
        if where in ("", "detail"):
            raise UnparseableEvent("not an EventBridge event (no detail object)") from None
        raise UnparseableEvent(f"not an EventBridge event: {where}: {what}") from None
    return envelope


def _event_time(envelope: _Envelope, detail_type: str) -> datetime:
    try:
        time = datetime.fromisoformat(envelope.time.replace("Z", "+00:00"))
    except ValueError:
        time = None
    if time is None or time.tzinfo is None:
        raise UnparseableEvent(f"{detail_type} without a valid time")
    return time


def parse_event(body: str | bytes) -> InstanceEvent | IgnoredEvent:
    """One EC2 event."""
    return _ec2_event(_envelope(body))


def _ec2_event(envelope: _Envelope) -> InstanceEvent | IgnoredEvent:
    detail_type = envelope.detail_type
    if envelope.source != "aws.ec2" or detail_type not in _KINDS:
        return IgnoredEvent(
            envelope.id,
            f"not handled: {printable(envelope.source, 64)} / {printable(detail_type, 64)}",
        )
    kind, detail_model = _KINDS[detail_type]
    try:
        detail = detail_model.model_validate(envelope.detail, strict=True)
    except ValidationError as error:
        where, _ = first_problem(error)
        raise UnparseableEvent(f"{detail_type} without a valid {where}") from None
    return InstanceEvent(
        event_id=envelope.id,
        kind=kind,
        instance_id=detail.instance_id,
        time=_event_time(envelope, detail_type),
        region=envelope.region,
        action=detail.instance_action if isinstance(detail, _SpotWarningDetail) else None,
        state=detail.state if isinstance(detail, _StateChangeDetail) else None,
    )


def screen(event: InstanceEvent, now: datetime, region: str, max_age: timedelta) -> str | None:
    """Why a well-formed event is not for us (another region, too old to act on), or None.

    An old event describes a past that heartbeats have since settled: a warning for an
    instance that is long gone, or a state the instance has left."""
    if event.region and region and event.region != region:
        return f"for region {printable(event.region, 64)}, this control plane runs in {region}"
    age = now - event.time
    if age > max_age:
        return f"{int(age.total_seconds())} s old, older than {int(max_age.total_seconds())} s"
    return None


def classify(event: InstanceEvent) -> Response:
    if event.kind is InstanceEventKind.SPOT_WARNING:
        return Response.CHECKPOINT_AND_MOVE
    if event.kind in (InstanceEventKind.REBALANCE, InstanceEventKind.SCHEDULED_CHANGE):
        return Response.STOP_ASSIGNING
    if event.state in _GONE_STATES:
        return Response.INSTANCE_GONE
    return Response.NOTHING
