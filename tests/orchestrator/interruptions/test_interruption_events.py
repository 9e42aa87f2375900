"""EventBridge EC2 events, in the exact shapes AWS delivers, parsed and classified."""

from __future__ import annotations

import json
from typing import Any

import pytest

from orchestrator.interruptions.events import (
    IgnoredEvent,
    InstanceEvent,
    InstanceEventKind,
    Response,
    UnparseableEvent,
    classify,
    parse_event,
    parse_events,
)

INSTANCE = "i-1234567890abcdef0"


def envelope(detail_type: str, detail: dict[str, Any], **extra: Any) -> str:
    event = {
        "version": "0",
        "id": "12345678-1234-1234-1234-123456789012",
        "detail-type": detail_type,
        "source": "aws.ec2",
        "time": "2026-01-01T12:00:00Z",
        "region": "us-east-2",
        "resources": [f"arn:aws:ec2:us-east-2:123456789012:instance/{INSTANCE}"],
        "detail": detail,
    }
    event.update(extra)
    return json.dumps(event)


@pytest.mark.parametrize(
    ("body", "kind", "response"),
    [
        (
            envelope(
                "EC2 Spot Instance Interruption Warning",
                {"instance-id": INSTANCE, "instance-action": "terminate"},
            ),
            InstanceEventKind.SPOT_WARNING,
            Response.CHECKPOINT_AND_MOVE,
        ),
        (
            envelope(
                "EC2 Spot Instance Interruption Warning",
                {"instance-id": INSTANCE, "instance-action": "hibernate"},
            ),
            InstanceEventKind.SPOT_WARNING,
            Response.CHECKPOINT_AND_MOVE,
        ),
        (
            envelope("EC2 Instance Rebalance Recommendation", {"instance-id": INSTANCE}),
            InstanceEventKind.REBALANCE,
            Response.STOP_ASSIGNING,
        ),
        (
            envelope(
                "EC2 Instance State-change Notification",
                {"instance-id": INSTANCE, "state": "shutting-down"},
            ),
            InstanceEventKind.STATE_CHANGE,
            Response.INSTANCE_GONE,
        ),
        (
            envelope(
                "EC2 Instance State-change Notification",
                {"instance-id": INSTANCE, "state": "terminated"},
            ),
            InstanceEventKind.STATE_CHANGE,
            Response.INSTANCE_GONE,
        ),
        (
            envelope(
                "EC2 Instance State-change Notification",
                {"instance-id": INSTANCE, "state": "running"},
            ),
            InstanceEventKind.STATE_CHANGE,
            Response.NOTHING,
        ),
    ],
)
def test_ec2_events_are_parsed_and_classified(
    body: str, kind: InstanceEventKind, response: Response
) -> None:
    event = parse_event(body)
    assert isinstance(event, InstanceEvent)
    assert (event.kind, event.instance_id, event.region) == (kind, INSTANCE, "us-east-2")
    assert event.time.isoformat() == "2026-01-01T12:00:00+00:00"
    assert classify(event) is response


def test_account_is_not_required() -> None:
    # moto's delivered events lack `account`; real ones have it. Neither matters here.
    body = envelope("EC2 Instance Rebalance Recommendation", {"instance-id": INSTANCE})
    assert "account" not in json.loads(body)
    assert isinstance(parse_event(body), InstanceEvent)


@pytest.mark.parametrize(
    "body",
    [
        envelope("EC2 Instance Launch Successful", {"instance-id": INSTANCE}),
        envelope(
            "EC2 Spot Instance Interruption Warning",
            {"instance-id": INSTANCE, "instance-action": "terminate"},
            source="aws.autoscaling",
        ),
    ],
)
def test_unknown_events_are_no_ops(body: str) -> None:
    assert isinstance(parse_event(body), IgnoredEvent)


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ("{nope", "not JSON"),
        ("[]", "no detail object"),
        (envelope("EC2 Instance Rebalance Recommendation", {}), "without a valid instance-id"),
        (
            envelope("EC2 Instance Rebalance Recommendation", {"instance-id": "i-../x"}),
            "without a valid instance-id",
        ),
        (
            envelope(
                "EC2 Spot Instance Interruption Warning",
                {"instance-id": INSTANCE, "instance-action": "explode"},
            ),
            "instance-action",
        ),
        (
            envelope("EC2 Instance State-change Notification", {"instance-id": INSTANCE}),
            "without a valid state",
        ),
        (
            envelope(
                "EC2 Instance Rebalance Recommendation", {"instance-id": INSTANCE}, time="yesterday"
            ),
            "without a valid time",
        ),
    ],
)
def test_unparseable_events_are_refused_with_a_reason(body: str, complaint: str) -> None:
    with pytest.raises(UnparseableEvent, match=complaint):
        parse_event(body)


def health_event(category: str, entities: list[str], service: str = "EC2") -> str:
    """An AWS Health event as EventBridge delivers it (a scheduled retirement)."""
    detail = {
        "eventArn": "arn:aws:health:us-east-2::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/x",
        "service": service,
        "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
        "eventTypeCategory": category,
        "startTime": "Fri, 08 Jan 2026 12:00:00 GMT",
        "eventDescription": [{"language": "en_US", "latestDescription": "retiring"}],
        "affectedEntities": [{"entityValue": value} for value in entities],
    }
    return envelope("AWS Health Event", detail, source="aws.health", resources=entities)


def test_a_scheduled_change_to_ec2_is_acted_on_like_a_rebalance_for_each_instance() -> None:
    other = "i-0fedcba9876543210"
    events = parse_events(health_event("scheduledChange", [INSTANCE, other, INSTANCE, "vol-1"]))
    assert isinstance(events, tuple)
    assert [e.instance_id for e in events] == [INSTANCE, other]
    for event in events:
        assert event.kind is InstanceEventKind.SCHEDULED_CHANGE
        assert event.action == "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"
        assert classify(event) is Response.STOP_ASSIGNING


@pytest.mark.parametrize(
    "body",
    [
        health_event("issue", [INSTANCE]),
        health_event("scheduledChange", [INSTANCE], service="RDS"),
        health_event("scheduledChange", ["vol-0123"]),
    ],
)
def test_other_health_events_are_no_ops(body: str) -> None:
    assert isinstance(parse_events(body), IgnoredEvent)


def test_an_ec2_event_is_one_instance_event() -> None:
    body = envelope("EC2 Instance Rebalance Recommendation", {"instance-id": INSTANCE})
    events = parse_events(body)
    assert isinstance(events, tuple)
    assert [e.instance_id for e in events] == [INSTANCE]
