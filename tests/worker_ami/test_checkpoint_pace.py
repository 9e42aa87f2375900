"""Workers checkpoint at the Young/Daly interval of their own pool: the autoscaler shares each
spot pool's measured interruption rate through the store, the control plane sends the pool's
mean time between interruptions with each assignment, and the agent's runner checkpoints at
that pace instead of its fixed setting."""

from __future__ import annotations

from kernel.clock import FakeClock
from kernel.worker_protocol import CommandKind
from orchestrator.store.job_store import JobStore
from tests.support.control_plane import placed, plane_in_memory
from tests.support.renders import Buckets, make_runner, video_job
from worker_ami.agent.model_cache import ModelRegistry
from worker_ami.agent.object_store import S3ObjectStore
from worker_ami.agent.report import RunStatus
from worker_ami.agent.settings import WorkerSettings


async def test_an_assignment_carries_its_pools_mean_time_between_interruptions(
    store: JobStore, clock: FakeClock
) -> None:
    # The hellos of tests/support/control_plane.py: spot g6.xlarge workers in us-east-1a.
    store.rates.record_pool_rates(
        {("g6.xlarge", "us-east-1a"): 4.0, ("g6.xlarge", "us-east-1b"): 1.0}
    )
    plane, link = plane_in_memory(store, clock)
    owner = await placed(store, clock, plane)
    (assign,) = [c for c in link.commands if c.kind is CommandKind.ASSIGN]
    assert assign.worker_id == owner
    assert assign.mtbi_seconds == 900.0  # four interruptions an hour
    assert store.rates.pool_rates()[("g6.xlarge", "us-east-1b")] == 1.0


async def test_a_pool_never_measured_leaves_the_interval_to_the_worker(
    store: JobStore, clock: FakeClock
) -> None:
    plane, link = plane_in_memory(store, clock)
    await placed(store, clock, plane)
    (assign,) = [c for c in link.commands if c.kind is CommandKind.ASSIGN]
    assert assign.mtbi_seconds is None


class TickingClock(FakeClock):
    """Every reading of the monotonic clock is one second after the last, so each step and
    each checkpoint write measures one second whatever the machine's load: the checkpoint
    decisions follow from the interval alone."""

    def monotonic(self) -> float:
        self.advance(1.0)
        return super().monotonic()


async def test_the_runner_checkpoints_at_the_pace_it_is_given(
    object_store: S3ObjectStore,
    published_model: ModelRegistry,
    worker_settings: WorkerSettings,
    buckets: Buckets,
) -> None:
    # Its own setting: an interruption a month, so a Young/Daly interval of minutes and no
    # checkpoint in a job of a few ticking seconds.
    runner = make_runner(
        object_store,
        published_model,
        worker_settings,
        TickingClock(),
        mean_time_between_interruptions_s=30 * 24 * 3600.0,
        initial_checkpoint_write_s=0.01,
    )
    calm = await runner.run(video_job(buckets, "calm-pool", steps=6), 1)
    assert calm.status is RunStatus.SUCCEEDED
    assert calm.checkpoints_written == []
    # A pool interrupted every millisecond: Young/Daly says checkpoint after every step that
    # leaves more work than a write costs, which is every step but the last.
    stormy = await runner.run(video_job(buckets, "stormy-pool", steps=6), 1, None, 1e-3)
    assert stormy.status is RunStatus.SUCCEEDED
    assert len(stormy.checkpoints_written) == 5
