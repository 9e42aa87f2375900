"""Fail fast and contain, end to end on the tiny pipeline: every job renders in a process of
its own, so a job past its memory limit or one that segfaults ends alone; a job whose step
blocks is killed by the worker's watchdog and resumes elsewhere from its checkpoint, with the
same video; a GPU whose NVML reports uncorrected ECC errors is quarantined and its job moves.
The faults come from test hooks in the render process (`render_test_hooks`) and a fake NVML."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING

from framefleet.control_plane import control_plane
from framefleet.settings import ControlConfig
from kernel.clock import SystemClock
from kernel.fleet_facts import GpuFaultKind
from kernel.job_state import JobState
from orchestrator.store.job_store import JobStore
from tests.support.renders import read_object, video_job
from tests.support.waits import async_wait_until
from tests.support.worker_process import FREQUENT_CHECKPOINTS
from tests.worker_ami.system import LocalSystem, fleet, where_running
from worker_ami.agent.report import RunStatus
from worker_ami.agent.runner import JobRunner

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

HOOKS = "FRAMEFLEET_WORKER_RENDER_TEST_HOOKS"


def hooks_file(folder: Path, hooks: dict[str, dict[str, float]]) -> str:
    path = folder / f"hooks-{len(list(folder.glob('hooks-*')))}.json"
    path.write_text(json.dumps(hooks))
    return str(path)


def state_of(store: JobStore, job_id: str) -> JobState | None:
    job = store.find(job_id)
    return job.state if job else None


def reasons(store: JobStore, job_id: str) -> str:
    if store.find(job_id) is None:
        return ""
    return " | ".join(event.reason for event in store.history(job_id))


async def same_video(
    runner: JobRunner, system: LocalSystem, s3: S3Client, job_id: str, steps: int
) -> None:
    """The job's output equals an uninterrupted render of the same spec, bit for bit."""
    metadata = json.loads(read_object(s3, system.buckets.outputs, f"{job_id}/{job_id}.json"))
    reference = await runner.run(video_job(system.buckets, job_id, steps=steps), 1)
    assert reference.status is RunStatus.SUCCEEDED
    assert metadata["video_sha256"] == reference.video_sha256


async def test_a_job_past_its_memory_limit_and_a_segfaulting_one_fail_alone(
    system: LocalSystem, runner: JobRunner, s3: S3Client
) -> None:
    greedy = video_job(system.buckets, "greedy", steps=6)
    crash = video_job(system.buckets, "crash", steps=6)
    healthy = video_job(system.buckets, "healthy", steps=24)
    hooks = hooks_file(
        system.tmp_path,
        {
            "greedy": {"allocate_gib_at_step": 1, "allocate_gib": 32},
            "crash": {"segfault_at_step": 1},
        },
    )
    env = {
        HOOKS: hooks,
        "FRAMEFLEET_WORKER_CPU_SLOTS": "3",
        "FRAMEFLEET_WORKER_JOB_MEMORY_GIB": "3",
    }
    settings = system.plane_settings(ControlConfig(tick_seconds=0.2))
    system.submit(healthy, greedy, crash)
    stop = asyncio.Event()
    async with (
        control_plane(settings, SystemClock()) as plane,
        fleet(system, ("i-0000000000000150",), env) as w,
    ):
        store = plane.store
        task = asyncio.create_task(plane.run(stop))
        try:
            await async_wait_until(
                lambda: (
                    state_of(store, healthy.job_id) is JobState.SUCCEEDED
                    and "out of memory" in reasons(store, greedy.job_id)
                    and "SIGSEGV" in reasons(store, crash.job_id)
                ),
                180,
            )
            # Both faulty jobs ended on this worker's GPUs; the agent goes on.
            assert w.processes["i-0000000000000150"].returncode is None
        finally:
            stop.set()
            await task
        greedy_said, crash_said = reasons(store, greedy.job_id), reasons(store, crash.job_id)
        # The job's own fault (it asked for more memory than its limit); the segfault is
        # counted as the worker's and retried elsewhere (no other worker here: it waits).
        assert "job fault 1 of 2" in greedy_said
        assert "worker fault on i-0000000000000150" in crash_said
        assert store.get(greedy.job_id).state is JobState.QUEUED
        assert store.get(crash.job_id).state is JobState.QUEUED
    await same_video(runner, system, s3, healthy.job_id, 24)


async def test_a_blocked_step_is_killed_and_the_job_resumes_elsewhere_within_the_bound(
    system: LocalSystem, runner: JobRunner, s3: S3Client
) -> None:
    hung = video_job(system.buckets, "hung", steps=16)
    # Late enough in the job that periodic checkpoints came before it, however fast the steps.
    hooks = hooks_file(system.tmp_path, {"hung": {"block_at_step": 12}})
    bound_s = 3.0
    watched = FREQUENT_CHECKPOINTS | {
        HOOKS: hooks,
        "FRAMEFLEET_WORKER_STALL_FLOOR_S": str(bound_s),
        "FRAMEFLEET_WORKER_INITIAL_CHECKPOINT_WRITE_S": "0.0001",
        "FRAMEFLEET_WORKER_STALL_STARTUP_S": "5",
    }
    settings = system.plane_settings(ControlConfig(tick_seconds=0.2))
    system.submit(hung)
    stop = asyncio.Event()
    async with (
        control_plane(settings, SystemClock()) as plane,
        fleet(system, ("i-000000000000005a1",), watched),
    ):
        store = plane.store
        task = asyncio.create_task(plane.run(stop))
        try:
            await async_wait_until(
                lambda: where_running(store, hung.job_id) == "i-000000000000005a1", 120
            )
            async with fleet(system, ("i-000000000000005b2",)):
                await async_wait_until(
                    lambda: store.get(hung.job_id).state is JobState.SUCCEEDED, 120
                )
        finally:
            stop.set()
            await task
        history = store.history(hung.job_id)
        faults = store.faults.gpu_faults("i-000000000000005a1")
        attempts = store.cost_facts.attempts_of(hung.job_id)
    # The stall is the GPU's, recorded with it, and the job went on elsewhere at once.
    assert [(f.gpu_index, f.kind) for f in faults] == [(0, GpuFaultKind.STALL)]
    assert f"no step within {bound_s:.1f} s" in faults[0].detail
    stalled = next(e for e in history if "stalled on i-000000000000005a1" in e.reason)
    first = attempts[0]
    assert first.checkpointed_at is not None
    # Killed when the step after its last checkpoint ran past the bound (plus the event's
    # way to the control plane); then it resumed on the other worker from that checkpoint.
    assert 0 < (stalled.at - first.checkpointed_at).total_seconds() <= bound_s + 3.0
    assert "finished on i-000000000000005b2" in history[-1].reason
    metadata = json.loads(read_object(s3, system.buckets.outputs, "hung/hung.json"))
    assert metadata["resumed_from"] is not None
    await same_video(runner, system, s3, hung.job_id, 16)
