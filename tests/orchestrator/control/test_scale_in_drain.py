"""Scale-in drains before it terminates, and a rebalance recommendation drains the same way from
EventBridge and from IMDS: the control plane assigns nothing more to an instance
the autoscaler asked to drain, moves its running job off (checkpoint first), and reports the
instance empty only when nothing runs there. The real control plane on a fake clock and a real
store; the autoscaler's side is in tests/autoscaler/test_loop.py."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kernel.clock import FakeClock
from kernel.job_record import DrainKind, Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.worker_protocol import Channel, CommandKind, EventKind, WorkerEvent, topic
from orchestrator.control.service import ControlPlaneService
from orchestrator.store.job_store import JobStore
from simulator.fakes import MemoryLink
from tests.support.control_plane import (
    OTHER,
    OWNER,
    WORKERS,
    event,
    heartbeats,
    hello,
    placed,
    plane_in_memory,
)
from tests.support.jobs import job_dict


async def test_an_idle_instance_is_drained_at_once_and_takes_no_new_job(
    store: JobStore, clock: FakeClock
) -> None:
    plane, _ = plane_in_memory(store, clock)
    for worker_id in WORKERS:
        await plane.on_message(topic(worker_id, Channel.HELLO), hello(worker_id, clock))
    store.instance_records.ask_to_drain([OWNER], "idle 11 min")
    await plane.tick()
    assert store.instance_records.drain_requests()[OWNER].drained_at == clock.now()
    # A job arriving after the request never lands on the instance on its way out.
    for n in range(3):
        store.intake.accept_batch(
            [Submission(parse_job(job_dict(f"after-{n}"), now=None), f"m{n}")]
        )
        await plane.tick()
    workers = {store.get(f"after-{n}").worker_id for n in range(3)}
    assert workers == {OTHER, None}  # one GPU there; the others wait


async def test_a_busy_instance_is_drained_once_its_job_has_moved(
    store: JobStore, clock: FakeClock
) -> None:
    plane, link = plane_in_memory(store, clock)
    owner = await placed(store, clock, plane)
    other = next(w for w in WORKERS if w != owner)
    await plane.on_message(
        topic(owner, Channel.EVENTS), event(owner, EventKind.STARTED, "victim", 1)
    )
    await plane.apply_pending()
    assert store.get("victim").state is JobState.RUNNING

    store.instance_records.ask_to_drain([owner], "scale-in: idle")
    await plane.tick()
    # Not empty yet: the job checkpoints first, and its worker is told to.
    assert store.instance_records.drain_requests()[owner].drained_at is None
    assert store.get("victim").state is JobState.CHECKPOINTING
    told = [c for c in link.commands if c.kind is CommandKind.CHECKPOINT_NOW]
    assert [(c.worker_id, c.job_id) for c in told] == [(owner, "victim")]

    checkpoint = "checkpoints/victim/1/000002/manifest.json"
    preempted = event(owner, EventKind.PREEMPTED, "victim", 1, step=2, checkpoint=checkpoint)
    await plane.on_message(topic(owner, Channel.EVENTS), preempted)
    await plane.apply_pending()
    clock.advance(timedelta(minutes=1).total_seconds())
    await heartbeats(plane, clock)
    await plane.tick()
    assert store.instance_records.drain_requests()[owner].drained_at is not None
    moved = store.get("victim")
    assert moved.state is JobState.ASSIGNED
    assert moved.worker_id == other  # resumes on the other instance, from its checkpoint
    assert moved.last_checkpoint == checkpoint


async def _running(
    store: JobStore, clock: FakeClock
) -> tuple[ControlPlaneService, MemoryLink, str]:
    plane, link = plane_in_memory(store, clock)
    owner = await placed(store, clock, plane)
    await plane.on_message(
        topic(owner, Channel.EVENTS), event(owner, EventKind.STARTED, "victim", 1)
    )
    await plane.apply_pending()
    return plane, link, owner


@pytest.mark.parametrize("source", ["eventbridge", "imds"])
async def test_a_rebalance_recommendation_stops_assignments_and_lets_the_job_finish(
    store: JobStore, clock: FakeClock, source: str
) -> None:
    """The same from EventBridge and from the worker's IMDS: no new work there, the running
    job is not interrupted, and the instance is reported empty once it finishes (the
    autoscaler then terminates it; meanwhile it buys capacity elsewhere)."""
    plane, link, owner = await _running(store, clock)
    instance = owner
    if source == "eventbridge":
        await plane.instance_events.stop_assigning(
            instance, "EC2 Instance Rebalance Recommendation"
        )
    else:
        notice = WorkerEvent(
            worker_id=owner,
            sent_at=clock.now(),
            event_id="e-notice-1",
            kind=EventKind.NOTICE_SEEN,
            notice="rebalance",
        )
        await plane.on_message(topic(owner, Channel.EVENTS), notice.model_dump_json().encode())
        await plane.apply_pending()
    request = store.instance_records.drain_requests()[instance]
    assert request.kind is DrainKind.REBALANCE
    store.intake.accept_batch([Submission(parse_job(job_dict("newcomer"), now=None), "m-new")])
    await plane.tick()
    assert store.get("victim").state is JobState.RUNNING  # not interrupted
    assert not [c for c in link.commands if c.kind is CommandKind.CHECKPOINT_NOW]
    assert store.get("newcomer").worker_id != owner
    assert store.instance_records.drain_requests()[instance].drained_at is None

    output = "s3://framefleet-output/videos/victim.mp4"
    finished = event(owner, EventKind.FINISHED, "victim", 1, output=output)
    await plane.on_message(topic(owner, Channel.EVENTS), finished)
    await plane.apply_pending()
    await plane.tick()
    assert store.get("victim").state is JobState.SUCCEEDED
    assert store.instance_records.drain_requests()[instance].drained_at is not None
