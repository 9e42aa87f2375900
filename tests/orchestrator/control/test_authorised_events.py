"""Only the worker an attempt was given to may move its job; gone instances stay gone; a
message that breaks its handler is refused on its own. The control plane runs on a fake clock
with commands kept in memory, and a real store."""

from __future__ import annotations

import pytest

from kernel.clock import FakeClock
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.worker_protocol import (
    Channel,
    EventKind,
    Heartbeat,
    WorkerEvent,
    topic,
)
from orchestrator.control import job_events
from orchestrator.control.service import ControlPlaneService
from orchestrator.store.job_store import JobStore
from simulator.fakes import KeptDeadLetters
from tests.support.control_plane import (
    FORGERIES,
    NOW,
    WORKERS,
    event,
    hello,
    placed,
    plane_in_memory,
)
from tests.support.jobs import job_dict


def service(store: JobStore, clock: FakeClock, dead: KeptDeadLetters) -> ControlPlaneService:
    return plane_in_memory(store, clock, dead)[0]


@pytest.mark.parametrize(("kind", "fields"), FORGERIES)
async def test_another_worker_cannot_move_a_job_by_event_or_heartbeat(
    store: JobStore, clock: FakeClock, kind: EventKind, fields: dict[str, object]
) -> None:
    dead = KeptDeadLetters()
    plane = service(store, clock, dead)
    owner = await placed(store, clock, plane)
    other = next(w for w in WORKERS if w != owner)
    before = store.get("victim")

    forged = event(other, kind, "victim", before.attempt, **fields)
    await plane.on_message(topic(other, Channel.EVENTS), forged)
    beat = Heartbeat(
        worker_id=other, sent_at=NOW, sequence=1, recent=(WorkerEvent.model_validate_json(forged),)
    )
    await plane.on_message(topic(other, Channel.HEARTBEAT), beat.model_dump_json().encode())
    await plane.apply_pending()
    await plane.refusals.drain()

    after = store.get("victim")
    assert (after.state, after.version, after.last_checkpoint) == (
        before.state,
        before.version,
        before.last_checkpoint,
    )
    assert plane.refusals.count("not_owner") >= 1
    # Dead-lettered once, although the heartbeat repeated it.
    assert [a["framefleet-reason"] for _, a in dead.sent] == ["not_owner"]
    assert f"was given to {owner}" in dead.sent[0][1]["framefleet-errors"]


async def test_the_owner_still_moves_its_job_but_only_inside_its_own_output_prefix(
    store: JobStore, clock: FakeClock
) -> None:
    plane = service(store, clock, KeptDeadLetters())
    owner = await placed(store, clock, plane)
    attempt = store.get("victim").attempt
    outside = event(
        owner,
        EventKind.FINISHED,
        "victim",
        attempt,
        output="s3://framefleet-output/other-team/victim.mp4",
    )
    await plane.on_message(topic(owner, Channel.EVENTS), outside)
    elsewhere = "checkpoints/someone-else/1/000002/manifest.json"
    wrong_checkpoint = event(
        owner, EventKind.CHECKPOINT_DURABLE, "victim", attempt, checkpoint=elsewhere
    )
    await plane.on_message(topic(owner, Channel.EVENTS), wrong_checkpoint)
    await plane.apply_pending()
    assert store.get("victim").state is JobState.ASSIGNED
    assert store.get("victim").last_checkpoint is None

    inside = event(
        owner,
        EventKind.FINISHED,
        "victim",
        attempt,
        output="s3://framefleet-output/videos/victim.mp4",
    )
    await plane.on_message(
        topic(owner, Channel.EVENTS), inside.replace(b"e-finished", b"e-done-ok")
    )
    await plane.apply_pending()
    assert store.get("victim").state is JobState.SUCCEEDED


async def test_events_from_a_worker_that_never_said_hello_are_refused(
    store: JobStore, clock: FakeClock
) -> None:
    dead = KeptDeadLetters()
    plane = service(store, clock, dead)
    owner = await placed(store, clock, plane)
    stranger = "w-stranger"
    forged = WorkerEvent(
        worker_id=stranger,
        sent_at=NOW,
        event_id="e-stranger-1",
        kind=EventKind.FINISHED,
        job_id="victim",
        attempt=1,
    )
    await plane.on_message(topic(stranger, Channel.EVENTS), forged.model_dump_json().encode())
    await plane.apply_pending()
    await plane.refusals.drain()
    assert store.get("victim").worker_id == owner
    assert store.get("victim").state is JobState.ASSIGNED
    assert [a["framefleet-reason"] for _, a in dead.sent] == ["unknown_worker"]


async def test_a_gone_instance_stays_gone_across_a_restart(
    store: JobStore, clock: FakeClock
) -> None:
    plane = service(store, clock, KeptDeadLetters())
    owner = await placed(store, clock, plane)
    await plane.instance_events.instance_gone(owner, "EventBridge: terminated")
    assert store.get("victim").state is JobState.QUEUED

    # A new control plane on the same database gets the retained hello again.
    restarted = service(store, clock, KeptDeadLetters())
    await restarted.instance_events.remember_gone_instances()
    await restarted.on_message(topic(owner, Channel.HELLO), hello(owner, clock))
    assert restarted.registry.health(owner) is None
    assert restarted.refusals.count("gone_instance") == 1
    clock.advance(600)
    await restarted.tick()
    assert store.get("victim").state is JobState.QUEUED


async def test_a_message_that_breaks_its_handler_is_refused_alone(
    store: JobStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug met by one message: the others in its batch are still applied."""
    plane = service(store, clock, KeptDeadLetters())
    owner = await placed(store, clock, plane)
    attempt = store.get("victim").attempt
    store.intake.accept_batch([Submission(parse_job(job_dict("bystander"), now=None), "m-2")])

    real = job_events.apply_event

    def breaks_on_the_poison(job, message, now, policy):  # type: ignore[no-untyped-def]
        if message.event_id.startswith("e-poison"):
            raise KeyError("a bug this message finds")
        return real(job, message, now, policy)

    monkeypatch.setattr("orchestrator.control.service.apply_event", breaks_on_the_poison)
    poison = event(owner, EventKind.CHECKPOINT_DURABLE, "bystander", 1)
    await plane.on_message(
        topic(owner, Channel.EVENTS), poison.replace(b"e-checkpoint", b"e-poison")
    )
    started = event(owner, EventKind.STARTED, "victim", attempt)
    await plane.on_message(topic(owner, Channel.EVENTS), started)
    await plane.apply_pending()
    assert store.get("victim").state is JobState.RUNNING
    assert plane.refusals.count("handler_error") == 1
