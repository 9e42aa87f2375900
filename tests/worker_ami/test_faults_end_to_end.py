"""Faults across processes: a worker killed without notice, the control plane killed and
restarted, the broker restarted, and stale or malformed worker messages."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import aiomqtt

from framefleet.control_plane import control_plane
from framefleet.settings import ControlConfig
from kernel.clock import SystemClock
from kernel.job_state import JobState
from kernel.worker_protocol import Channel, EventKind, WorkerEvent, topic
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from tests.support.renders import video_job
from tests.support.waits import async_wait_until
from tests.support.worker_process import FREQUENT_CHECKPOINTS
from tests.worker_ami.system import LocalSystem, fleet, where_running

if TYPE_CHECKING:
    pass


def checkpointed(store: JobStore, job_id: str) -> bool:
    job = store.find(job_id)
    return job is not None and job.last_checkpoint is not None


def state_of(store: JobStore, job_id: str) -> JobState | None:
    job = store.find(job_id)
    return job.state if job else None


# Fast timeouts: a lost worker is noticed in seconds.
FAST_CONTROL = ControlConfig(
    tick_seconds=0.2, resend_after_seconds=1, suspect_after_seconds=2, lost_after_seconds=4
)


async def test_an_on_demand_worker_killed_without_notice_resumes_from_its_last_checkpoint(
    system: LocalSystem,
) -> None:
    # On-demand capacity checkpoints too, at the Young/Daly interval of its host's failures:
    # a host failure (here a SIGKILL) costs the work since the last checkpoint, not the job.
    settings = system.plane_settings(FAST_CONTROL)
    spec = video_job(system.buckets, "no-notice", steps=400)
    system.submit(spec)
    stop = asyncio.Event()
    async with (
        control_plane(settings, SystemClock()) as plane,
        fleet(
            system,
            ("i-000000000000001a1", "i-000000000000001b2"),
            FREQUENT_CHECKPOINTS,
            lifecycle="on-demand",
        ) as workers,
    ):
        store = plane.store
        task = asyncio.create_task(plane.run(stop))
        try:
            await async_wait_until(lambda: checkpointed(store, spec.job_id), 120)
            victim = where_running(store, spec.job_id)
            assert victim is not None
            saved = store.get(spec.job_id).checkpoint_step
            workers.processes[victim].send_signal(signal.SIGKILL)  # no notice at all
            await async_wait_until(lambda: store.get(spec.job_id).state is JobState.SUCCEEDED, 120)
        finally:
            stop.set()
            await task
        history = store.history(spec.job_id)
    reasons = " ".join(event.reason for event in history)
    assert "went offline" in reasons or "heartbeats stopped" in reasons
    assert history[-1].to_state is JobState.SUCCEEDED
    assert [e.to_state for e in history].count(JobState.SUCCEEDED) == 1
    resumed = [e for e in history if e.to_state is JobState.QUEUED and e.from_state]
    assert resumed, "the job went back to the queue"
    assert saved > 0  # its on-demand worker had checkpointed periodically before it died


async def test_control_plane_crash_and_broker_restart_lose_nothing_and_duplicate_nothing(
    system: LocalSystem,
) -> None:
    settings = system.plane_settings(FAST_CONTROL)
    specs = [video_job(system.buckets, f"cp-{i}", steps=120) for i in range(5)]
    for spec in specs:
        system.submit(spec)
    env = {
        **os.environ,
        "FRAMEFLEET_ENDPOINT_URL": system.moto_endpoint,
        "FRAMEFLEET_JOBS_QUEUE_URL": system.queues.jobs_url,
        "FRAMEFLEET_DEAD_LETTER_QUEUE_URL": system.queues.dead_letter_url,
        "FRAMEFLEET_DATABASE_URL": settings.database_url.get_secret_value(),
        "FRAMEFLEET_INTAKE__WAIT_SECONDS": "1",
        "FRAMEFLEET_MQTT__HOST": "127.0.0.1",
        "FRAMEFLEET_MQTT__PORT": str(system.broker.port),
        "FRAMEFLEET_CONTROL__TICK_SECONDS": "0.2",
        "FRAMEFLEET_CONTROL__RESEND_AFTER_SECONDS": "1",
    }
    log_file = (system.tmp_path / "control-plane.log").open("ab")

    async def start_control_plane() -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "framefleet", "serve", env=env, stdout=log_file, stderr=log_file
        )

    engine = make_engine(settings.database_url.get_secret_value())
    store = JobStore(engine, SystemClock())

    def states() -> list[JobState]:
        try:
            return [store.get(spec.job_id).state for spec in specs]
        except Exception:
            return []

    async with fleet(system, ("i-00000000000000ca1", "i-00000000000000cb2")):
        first = await start_control_plane()
        await async_wait_until(lambda: JobState.RUNNING in states(), 120)
        first.send_signal(signal.SIGKILL)
        await first.wait()
        second = await start_control_plane()
        try:
            await async_wait_until(lambda: states().count(JobState.SUCCEEDED) >= 1, 120)
            await asyncio.to_thread(system.broker.restart)
            await async_wait_until(lambda: states() == [JobState.SUCCEEDED] * len(specs), 180)
        finally:
            if second.returncode is None:
                second.send_signal(signal.SIGTERM)
        assert await second.wait() == 0
    log_file.close()
    for spec in specs:
        history = store.history(spec.job_id)
        assert [e.to_state for e in history].count(JobState.SUCCEEDED) == 1, spec.job_id
    store.dispose()


async def test_stale_and_malformed_worker_messages_are_ignored_and_logged(
    system: LocalSystem,
) -> None:
    settings = system.plane_settings(FAST_CONTROL)
    spec = video_job(system.buckets, "fenced", steps=60)
    system.submit(spec)
    stop = asyncio.Event()
    async with (
        control_plane(settings, SystemClock()) as plane,
        fleet(system, ("i-000000000000005a1",)),
        aiomqtt.Client("127.0.0.1", system.broker.port, identifier="zombie") as zombie,
    ):
        store = plane.store
        service = plane.service
        assert service is not None
        task = asyncio.create_task(plane.run(stop))
        try:
            await async_wait_until(lambda: where_running(store, spec.job_id) is not None, 120)
            worker_id = where_running(store, spec.job_id)
            assert worker_id is not None
            # A zombie from an attempt that never was the current one claims the job is done,
            await zombie.publish(
                topic(worker_id, Channel.EVENTS),
                WorkerEvent(
                    worker_id=worker_id,
                    sent_at=datetime.now(UTC),
                    event_id="zombie-0001",
                    kind=EventKind.FINISHED,
                    job_id=spec.job_id,
                    attempt=7,
                    output="s3://evil/x.mp4",
                ).model_dump_json(),
                qos=1,
            )
            # and garbage arrives on a worker topic.
            await zombie.publish(topic(worker_id, Channel.HEARTBEAT), b"\x00not json", qos=1)
            await async_wait_until(lambda: service.stats.stale_events >= 1, 30)
            await async_wait_until(lambda: service.stats.ignored_messages >= 1, 30)
            assert store.get(spec.job_id).state is JobState.RUNNING
            await async_wait_until(lambda: store.get(spec.job_id).state is JobState.SUCCEEDED, 120)
        finally:
            stop.set()
            await task
        assert "s3://evil" not in " ".join(e.reason for e in store.history(spec.job_id))
