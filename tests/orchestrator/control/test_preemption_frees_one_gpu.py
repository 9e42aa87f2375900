"""A preemption frees one GPU for one job: while the victim checkpoints, the next rounds evict
nobody else for the same job, and once the victim is off the GPU the preemptor takes it."""

from __future__ import annotations

from kernel.clock import FakeClock
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.worker_protocol import Channel, CommandKind, EventKind, topic
from orchestrator.control.service import ControlPlaneService
from orchestrator.store.job_store import JobStore
from tests.support.control_plane import OTHER, OWNER, event, hello, plane_in_memory
from tests.support.jobs import job_dict


async def start(plane: ControlPlaneService, store: JobStore, job_id: str) -> str:
    job = store.get(job_id)
    assert job.worker_id is not None
    started = event(job.worker_id, EventKind.STARTED, job_id, job.attempt)
    await plane.on_message(topic(job.worker_id, Channel.EVENTS), started)
    await plane.apply_pending()
    return job.worker_id


async def test_one_urgent_job_evicts_one_victim_and_takes_its_gpu(
    store: JobStore, clock: FakeClock
) -> None:
    plane, link = plane_in_memory(store, clock)
    for worker_id in (OWNER, OTHER):
        await plane.on_message(topic(worker_id, Channel.HELLO), hello(worker_id, clock))
    store.intake.accept_batch(
        [
            Submission(parse_job(job_dict(j, priority=1), now=None), f"m-{j}")
            for j in ("low-a", "low-b")
        ]
    )
    await plane.tick()
    for job_id in ("low-a", "low-b"):
        await start(plane, store, job_id)
    store.intake.accept_batch(
        [Submission(parse_job(job_dict("urgent", priority=9), now=None), "m-u")]
    )

    for _ in range(3):  # the victim takes a while to checkpoint; rounds go on meanwhile
        await plane.tick()
        clock.advance(1)
    checkpointing = [j for j in ("low-a", "low-b") if store.get(j).state is JobState.CHECKPOINTING]
    assert len(checkpointing) == 1  # one victim, not one per round
    [victim] = checkpointing
    freed_on = store.get(victim).worker_id
    assert store.get("urgent").state is JobState.QUEUED

    job = store.get(victim)
    key = f"checkpoints/{victim}/{job.attempt}/000002/manifest.json"
    stopped = event(str(freed_on), EventKind.PREEMPTED, victim, job.attempt, checkpoint=key, step=2)
    await plane.on_message(topic(str(freed_on), Channel.EVENTS), stopped)
    await plane.apply_pending()
    link.commands.clear()
    await plane.tick()
    urgent = store.get("urgent")
    assert (urgent.state, urgent.worker_id) == (JobState.ASSIGNED, freed_on)
    assert [(c.kind, c.job_id) for c in link.commands] == [(CommandKind.ASSIGN, "urgent")]
    assert store.holds.preemption_holds() == {}  # placed: nothing left to hold
