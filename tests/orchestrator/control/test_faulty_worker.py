"""A worker that faults a job, or fails its preflight for it, is not given that job again; a
failed preflight reaches the control plane with its reasons. The control plane runs on a fake
clock with a real store; the worker's side is the agent's own service."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import cast

import pytest

from kernel.clock import FakeClock
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.worker_protocol import (
    Channel,
    EventKind,
    WorkerEvent,
    topic,
)
from orchestrator.scheduling.policy import schedule
from orchestrator.scheduling.snapshots import GpuSlot, PendingJob, WorkerSnapshot
from orchestrator.store.job_store import JobStore
from tests.support.control_plane import NOW, event, heartbeats, placed, plane_in_memory
from tests.support.jobs import assignment, job_dict
from tests.support.workers import InstantRunner, NoNvml, without_broker
from worker_ami.agent.object_store import S3ObjectStore
from worker_ami.agent.parts import WorkerParts
from worker_ami.agent.service import WorkerService
from worker_ami.agent.settings import WorkerSettings


def test_the_scheduler_keeps_a_job_off_the_workers_it_must_avoid() -> None:
    small = WorkerSnapshot("w-small", (GpuSlot("w-small", 0, "l4", 24),))
    large = WorkerSnapshot("w-large", (GpuSlot("w-large", 0, "l40s", 48),))
    twin = WorkerSnapshot("w-twin", (GpuSlot("w-twin", 0, "l4", 24),))
    job = PendingJob("j", 5, None, NOW, 16, avoid=frozenset({"w-small"}))
    # The best fit (the smallest GPU) is w-small; its twin of the same kind is next.
    decisions = schedule([job], [small, twin, large], NOW)
    assert [a.worker_id for a in decisions.assignments] == ["w-twin"]
    decisions = schedule([job], [small, large], NOW)
    assert [a.worker_id for a in decisions.assignments] == ["w-large"]
    assert schedule([job], [small], NOW).assignments == ()


@pytest.mark.parametrize(
    ("failure_kind", "error"),
    [("preflight", "free disk 0.1 GiB < 20.0 GiB required"), ("worker", "CUDA error: ECC")],
)
async def test_the_next_attempt_goes_to_another_worker(
    store: JobStore, clock: FakeClock, failure_kind: str, error: str
) -> None:
    plane, _ = plane_in_memory(store, clock)
    owner = await placed(store, clock, plane)
    failed = event(owner, EventKind.FAILED, "victim", 1, failure_kind=failure_kind, error=error)
    await plane.on_message(topic(owner, Channel.EVENTS), failed)
    await plane.apply_pending()
    requeued = store.get("victim")
    assert requeued.state is JobState.QUEUED
    assert error in store.history("victim")[-1].reason  # the worker's reasons, as it gave them
    assert store.faulted_on(["victim"]) == {"victim": {owner}}

    clock.advance(timedelta(minutes=5).total_seconds())  # past any backoff
    await heartbeats(plane, clock)
    await plane.tick()
    again = store.get("victim")
    assert again.state is JobState.ASSIGNED
    assert again.attempt == 2
    assert again.worker_id not in (None, owner)


async def test_a_plain_refusal_does_not_keep_the_job_off_the_worker(
    store: JobStore, clock: FakeClock
) -> None:
    """Draining or a busy GPU says nothing about the machine: no avoidance."""
    plane, _ = plane_in_memory(store, clock)
    owner = await placed(store, clock, plane)
    refused = event(owner, EventKind.FAILED, "victim", 1, failure_kind="refused", error="busy")
    await plane.on_message(topic(owner, Channel.EVENTS), refused)
    await plane.apply_pending()
    assert store.get("victim").state is JobState.QUEUED
    assert store.faulted_on(["victim"]) == {}


async def test_a_worker_that_fails_its_preflight_refuses_the_job_with_every_reason(
    tmp_path: Path, clock: FakeClock
) -> None:
    link, handlers, connect = without_broker()

    # No GPU and CPU mode not allowed, and far more free disk asked for than there is.
    settings = WorkerSettings(
        imds_enabled=False,
        cache_dir=tmp_path,
        cpu_slots=1,
        allow_cpu=False,
        min_free_disk_gib=10**9,
    )
    parts = WorkerParts(
        settings,
        InstantRunner(),
        cast(S3ObjectStore, None),
        None,
        None,
        clock,
        lambda _device, _gpu: InstantRunner(),
        NoNvml(),
    )
    WorkerService("w-sick", parts, clock, connect)
    spec = parse_job(job_dict("needs-a-gpu"), now=None)
    await handlers[0](*assignment("w-sick", spec, clock.now()))
    async with asyncio.timeout(10):
        while not any('"failed"' in p for p in link.payloads):
            link.sent.clear()
            await link.sent.wait()
    (refusal,) = [WorkerEvent.model_validate_json(p) for p in link.payloads]
    assert refusal.kind is EventKind.FAILED
    assert refusal.failure_kind == "preflight"
    assert refusal.error is not None
    assert "CPU mode is not allowed" in refusal.error
    assert "free disk" in refusal.error  # every reason at once
