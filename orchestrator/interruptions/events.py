"""Parse and classify EC2 events delivered by EventBridge (pure).

parse -> classify -> act -> delete the SQS message only after the action is durable. Unknown
events are no-ops; unparseable ones are dead-lettered.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from orchestrator.domain.errors import FrameFleetError

SPOT_WARNING = "EC2 Spot Instance Interruption Warning"
REBALANCE = "EC2 Instance Rebalance Recommendation"
STATE_CHANGE = "EC2 Instance State-change Notification"
INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,32}$")


class UnparseableEvent(FrameFleetError):
    pass


class EventKind(StrEnum):
    SPOT_WARNING = "spot_warning"
    REBALANCE = "rebalance"
    STATE_CHANGE = "state_change"


@dataclass(frozen=True)
class InstanceEvent:
    event_id: str
    kind: EventKind
    instance_id: str
    time: datetime
    region: str
    action: str | None = None  # terminate | stop | hibernate (spot warning)
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


_GONE_STATES = {"stopping", "stopped", "shutting-down", "terminated"}
_KINDS = {SPOT_WARNING: EventKind.SPOT_WARNING, REBALANCE: EventKind.REBALANCE,
          STATE_CHANGE: EventKind.STATE_CHANGE}  # fmt: skip


def parse_event(body: str) -> InstanceEvent | IgnoredEvent:
    try:
        event = json.loads(body)
    except json.JSONDecodeError as error:
        raise UnparseableEvent(f"not JSON: {error}") from None
    if not isinstance(event, dict) or not isinstance(event.get("detail"), dict):
        raise UnparseableEvent("not an EventBridge event (no detail object)")
    event_id = str(event.get("id", ""))
    detail_type = event.get("detail-type")
    if event.get("source") != "aws.ec2" or detail_type not in _KINDS:
        return IgnoredEvent(event_id, f"not handled: {event.get('source')} / {detail_type}")
    detail = event["detail"]
    instance_id = detail.get("instance-id")
    if not isinstance(instance_id, str) or not INSTANCE_ID.match(instance_id):
        raise UnparseableEvent(f"{detail_type} without a valid instance-id")
    try:
        time = datetime.fromisoformat(str(event["time"]).replace("Z", "+00:00"))
    except (KeyError, ValueError):
        raise UnparseableEvent(f"{detail_type} without a valid time") from None
    kind = _KINDS[detail_type]
    action = detail.get("instance-action") if kind is EventKind.SPOT_WARNING else None
    state = detail.get("state") if kind is EventKind.STATE_CHANGE else None
    if kind is EventKind.SPOT_WARNING and action not in {"terminate", "stop", "hibernate"}:
        raise UnparseableEvent(f"spot warning with instance-action {action!r}")
    if kind is EventKind.STATE_CHANGE and not isinstance(state, str):
        raise UnparseableEvent("state change without a state")
    return InstanceEvent(
        event_id=event_id,
        kind=kind,
        instance_id=instance_id,
        time=time,
        region=str(event.get("region", "")),
        action=action,
        state=state,
    )


def classify(event: InstanceEvent) -> Response:
    if event.kind is EventKind.SPOT_WARNING:
        return Response.CHECKPOINT_AND_MOVE
    if event.kind is EventKind.REBALANCE:
        return Response.STOP_ASSIGNING
    if event.state in _GONE_STATES:
        return Response.INSTANCE_GONE
    return Response.NOTHING
