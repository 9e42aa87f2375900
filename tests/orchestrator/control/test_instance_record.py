"""One record per instance, shared by every replica: a spot warning heard by a standby moves
the jobs on the leader and keeps new work off the instance, and a preemption's hold on a GPU
survives a failover (on SQLite and PostgreSQL)."""

from __future__ import annotations

from kernel.clock import FakeClock
from kernel.instance_state import InstanceState
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.worker_protocol import Channel, topic
from orchestrator.control.leadership import Leadership
from orchestrator.control.service import ControlPlaneService
from orchestrator.store.job_store import JobStore
from tests.support.control_plane import WORKERS, hello, plane_in_memory, preempted, started
from tests.support.jobs import job_dict


async def replicas(
    store: JobStore, clock: FakeClock
) -> tuple[ControlPlaneService, ControlPlaneService, Leadership, Leadership]:
    """A leader and a standby on one store, both hearing the workers' hellos, and their
    leaderships."""
    leading = Leadership(store.leases, clock, "control-plane", "replica-a")
    waiting = Leadership(store.leases, clock, "control-plane", "replica-b")
    await leading.step()
    await waiting.step()
    assert leading.leading()
    assert not waiting.leading()
    leader = plane_in_memory(store, clock, leadership=leading)[0]
    standby = plane_in_memory(store, clock, leadership=waiting)[0]
    for plane in (leader, standby):
        for worker_id in WORKERS:
            await plane.on_message(topic(worker_id, Channel.HELLO), hello(worker_id, clock))
    return leader, standby, leading, waiting


def submit(store: JobStore, *jobs: tuple[str, int]) -> None:
    store.intake.accept_batch(
        [
            Submission(parse_job(job_dict(job_id, priority=priority), now=None), f"m-{job_id}")
            for job_id, priority in jobs
        ]
    )


async def test_a_warning_a_standby_hears_moves_the_jobs_on_the_leader(
    store: JobStore, clock: FakeClock
) -> None:
    leader, standby, _, _ = await replicas(store, clock)
    submit(store, ("victim", 5))
    await leader.tick()
    warned = await started(leader, store, "victim")

    assert (
        await standby.instance_events.interrupt_instance(
            warned, "EC2 Spot Instance Interruption Warning"
        )
        == []
    )
    status = store.instance_records.instance_statuses()[warned]
    assert status.state is InstanceState.WARNED  # at once, in the store every replica reads
    await leader.tick()
    assert store.get("victim").state is JobState.CHECKPOINTING

    await preempted(leader, store, "victim")
    submit(store, ("next", 5))
    await leader.tick()
    placed = {j.job_id: j.worker_id for j in store.list_jobs(JobState.ASSIGNED)}
    assert warned not in placed.values()  # its GPU is free, but it is leaving
    assert len(placed) == 1  # the one other GPU took one of the two jobs
    history = store.instance_records.instance_history(warned)
    assert [(c.after, c.actor) for c in history] == [(InstanceState.WARNED, "control-plane")]


async def test_a_new_leader_keeps_the_preemption_hold(store: JobStore, clock: FakeClock) -> None:
    leader, standby, leading, waiting = await replicas(store, clock)
    submit(store, ("low-a", 1), ("low-b", 1))
    await leader.tick()
    for job_id in ("low-a", "low-b"):
        await started(leader, store, job_id)
    submit(store, ("urgent", 9))
    await leader.tick()
    [victim] = [j for j in ("low-a", "low-b") if store.get(j).state is JobState.CHECKPOINTING]
    freed_on = store.get(victim).worker_id
    assert store.holds.preemption_holds() == {(freed_on, 0): "urgent"}

    # The leader goes; the standby takes the lease and has never seen the preemption.
    fence = leading.current()
    assert fence is not None
    store.leases.release_lease(fence)
    await waiting.step()
    assert waiting.leading()
    for _ in range(3):  # the victim takes a while to checkpoint; rounds go on meanwhile
        await standby.tick()
        clock.advance(1)
    checkpointing = [j for j in ("low-a", "low-b") if store.get(j).state is JobState.CHECKPOINTING]
    assert checkpointing == [victim]  # no second victim for the same job

    await preempted(standby, store, victim)
    await standby.tick()
    urgent = store.get("urgent")
    assert (urgent.state, urgent.worker_id) == (JobState.ASSIGNED, freed_on)
    assert store.holds.preemption_holds() == {}
