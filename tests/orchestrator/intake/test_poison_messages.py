"""No single message stops a loop: the poison inputs from the attack report go through the real
intake and interruptions loops (moto SQS over HTTP, a real store) and are dead-lettered with
their reason while the messages around them are handled."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest
from prometheus_client import CollectorRegistry

from kernel.clock import FakeClock
from kernel.errors import StoreUnavailable
from kernel.job_record import AcceptOutcome, Rejection, Submission
from kernel.job_state import JobState
from orchestrator.aws.dead_letters import peek_dead_letters
from orchestrator.intake.loop import IntakeLoop, IntakeSettings
from orchestrator.intake.metrics import IntakeMetrics
from orchestrator.intake.ports import ReceivedMessage
from orchestrator.interruptions.loop import InterruptionSettings, InterruptionsLoop
from simulator.fakes import KeptDeadLetters
from tests.support.intake import handled, queue_is_empty, running, send, settings_for
from tests.support.jobs import job_dict
from tests.support.local_services import Queues
from tests.support.waits import async_wait_until

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

INSTANCE = "i-1234567890abcdef0"


def spot_warning(detail: object, **envelope: object) -> str:
    return json.dumps(
        {
            "version": "0",
            "id": "evt-1",
            "detail-type": "EC2 Spot Instance Interruption Warning",
            "source": "aws.ec2",
            "time": "2026-12-03T11:59:00Z",
            "region": "us-east-1",
            "detail": detail,
            **envelope,
        }
    )


async def test_nested_brackets_and_lax_types_are_dead_lettered_and_the_rest_flows(
    moto_endpoint: str, queues: Queues, sqs: SQSClient, sqlite_url: str
) -> None:
    bodies = [
        "[" * 1000,  # killed `framefleet serve` with a RecursionError
        json.dumps(job_dict("lax-priority", priority=True)),
        json.dumps(job_dict("lax-steps", steps="30")),
        json.dumps(job_dict("nan-guidance", guidance=float("nan"))),
        json.dumps(job_dict("nul-prompt", prompt="a\x00b")),
        json.dumps(job_dict("fine")),
    ]
    ids = send(sqs, queues.jobs_url, bodies)
    async with running(settings_for(moto_endpoint, queues, sqlite_url)) as plane:
        await async_wait_until(
            lambda: (
                handled(plane.intake_metrics) >= len(bodies)
                and queue_is_empty(sqs, queues.jobs_url)
            )
        )
        assert [j.job_id for j in plane.store.list_jobs()] == ["fine"]
        assert plane.store.get("fine").state is JobState.QUEUED
    letters = {d.original_message_id: d for d in peek_dead_letters(sqs, queues.dead_letter_url)}
    assert letters[ids[0]].reason == "invalid_json"
    assert "recursion limit" in letters[ids[0]].errors
    assert "priority: Input should be a valid integer" in letters[ids[1]].errors
    assert "steps: Input should be a valid integer" in letters[ids[2]].errors
    assert "guidance: Input should be a finite number" in letters[ids[3]].errors
    assert "control characters" in letters[ids[4]].errors


class RefusingSink:
    """A store that cannot hold one particular job (as PostgreSQL refuses some values)."""

    def __init__(self, poison: str) -> None:
        self.poison = poison
        self.accepted: list[str] = []
        self.rejected: list[Rejection] = []

    def accept_batch(self, submissions: Sequence[Submission]) -> list[AcceptOutcome]:
        if any(s.spec.job_id == self.poison for s in submissions):
            raise ValueError("the database cannot store this value")
        self.accepted += [s.spec.job_id for s in submissions]
        return [AcceptOutcome.ACCEPTED for _ in submissions]

    def record_rejection(self, rejection: Rejection) -> bool:
        self.rejected.append(rejection)
        return True

    def mark_dead_lettered(self, message_id: str) -> None:
        return None


class DeletedQueue:
    def __init__(self) -> None:
        self.deleted: list[str] = []

    async def receive(self, *_: int) -> list[ReceivedMessage]:
        return []

    async def delete(self, receipt_handles: Sequence[str]) -> None:
        self.deleted += receipt_handles

    async def extend_visibility(self, receipt_handles: Sequence[str], seconds: int) -> None:
        return None


async def test_a_job_the_store_refuses_is_dead_lettered_alone(clock: FakeClock) -> None:
    sink, dead, queue = RefusingSink("poison"), KeptDeadLetters(), DeletedQueue()
    loop = IntakeLoop(
        queue, dead, sink, clock, IntakeMetrics(CollectorRegistry()), IntakeSettings()
    )
    batch = [
        ReceivedMessage(f"m-{name}", f"r-{name}", json.dumps(job_dict(name)), 1)
        for name in ("before", "poison", "after")
    ]
    await loop.process(batch)
    assert sink.accepted == ["before", "after"]
    assert [(r.message_id, r.reason) for r in sink.rejected] == [("m-poison", "handler_error")]
    assert "ValueError" in dead.sent[0][1]["framefleet-errors"]
    assert queue.deleted == ["r-before", "r-poison", "r-after"]


class FlakyActions:
    def __init__(self, failure: Exception | None = None) -> None:
        self.failure = failure
        self.interrupted: list[str] = []

    async def interrupt_instance(self, instance_id: str, reason: str) -> list[str]:
        if self.failure is not None:
            raise self.failure
        self.interrupted.append(instance_id)
        return []

    async def stop_assigning(self, instance_id: str, reason: str) -> None:
        return None

    async def instance_gone(self, instance_id: str, reason: str) -> None:
        return None


NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
GOOD = {"instance-id": INSTANCE, "instance-action": "terminate"}


def interruptions(
    actions: FlakyActions,
) -> tuple[InterruptionsLoop, DeletedQueue, KeptDeadLetters]:
    queue, dead = DeletedQueue(), KeptDeadLetters()
    settings = InterruptionSettings(region="us-east-1", max_tries=3)
    loop = InterruptionsLoop(queue, dead, actions, FakeClock(NOW), settings)
    return loop, queue, dead


@pytest.mark.parametrize(
    "detail",
    [
        {"instance-id": INSTANCE, "instance-action": ["terminate"]},
        {"instance-id": [INSTANCE], "instance-action": "terminate"},
        {"instance-id": INSTANCE, "instance-action": {"$ref": 1}},
        ["not", "an", "object"],
    ],
)
async def test_wrong_types_in_an_eventbridge_event_are_dead_lettered(detail: object) -> None:
    actions = FlakyActions()
    loop, queue, dead = interruptions(actions)
    await loop.handle(ReceivedMessage("m-bad", "r-bad", spot_warning(detail), 1))
    await loop.handle(ReceivedMessage("m-ok", "r-ok", spot_warning(GOOD), 1))
    assert [a["framefleet-reason"] for _, a in dead.sent] == ["unparseable_event"]
    assert actions.interrupted == [INSTANCE]
    assert queue.deleted == ["r-bad", "r-ok"]


@pytest.mark.parametrize(
    "envelope",
    [{"region": "eu-west-1"}, {"time": "2026-12-02T12:00:00Z"}],
    ids=["another region", "a day old"],
)
async def test_foreign_and_stale_events_are_ignored(envelope: dict[str, str]) -> None:
    actions = FlakyActions()
    loop, queue, dead = interruptions(actions)
    await loop.handle(ReceivedMessage("m-1", "r-1", spot_warning(GOOD, **envelope), 1))
    assert actions.interrupted == []
    assert dead.sent == []
    assert queue.deleted == ["r-1"]


async def test_an_action_that_keeps_failing_is_retried_then_dead_lettered() -> None:
    actions = FlakyActions(StoreUnavailable("database is down"))
    loop, queue, dead = interruptions(actions)
    for receive in (1, 2):
        await loop.handle(ReceivedMessage("m-1", "r-1", spot_warning(GOOD), receive))
    assert (queue.deleted, dead.sent) == ([], [])  # left for redelivery
    await loop.handle(ReceivedMessage("m-1", "r-1", spot_warning(GOOD), 3))
    assert [a["framefleet-reason"] for _, a in dead.sent] == ["gave_up"]
    assert queue.deleted == ["r-1"]


async def test_a_bug_in_an_action_dead_letters_that_event_only() -> None:
    actions = FlakyActions(KeyError("a bug"))
    loop, queue, dead = interruptions(actions)
    await loop.handle(ReceivedMessage("m-1", "r-1", spot_warning(GOOD), 1))
    assert [a["framefleet-reason"] for _, a in dead.sent] == ["handler_error"]
    assert queue.deleted == ["r-1"]
