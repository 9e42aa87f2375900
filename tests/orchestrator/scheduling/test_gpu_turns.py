"""Slots that take turns on one GPU (`jobs_per_gpu`): the worker offers each GPU as that many
slots with an even part of its memory, and the scheduler puts a job beside running neighbours
only where every job on the GPU still meets its deadline at the shared pace (and, where a
deadline is involved and some job's work is unknown, not at all)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from orchestrator.scheduling.policy import schedule
from orchestrator.scheduling.snapshots import (
    GpuSlot,
    PendingJob,
    RunningJob,
    Work,
    WorkerSnapshot,
)
from worker_ami.agent.gpus import detect_gpus
from worker_ami.agent.settings import WorkerSettings
from worker_ami.agent.telemetry import GpuTelemetry

NOW = datetime(2026, 12, 5, 12, tzinfo=UTC)
GIB = 1024**3


class OneL40S:
    def read(self) -> list[GpuTelemetry]:
        return [GpuTelemetry(0, "NVIDIA L40S", 0, 0, 48 * GIB, 40, 0)]


def test_a_shared_gpu_is_offered_as_slots_with_an_even_part_of_its_memory() -> None:
    settings = WorkerSettings(worker_id="w", device="cuda", jobs_per_gpu=2)
    slots = detect_gpus(OneL40S(), settings)
    assert [(s.gpu.index, s.gpu.vram_gib, s.gpu.physical, s.device) for s in slots] == [
        (0, 24.0, 0, "cuda:0"),
        (1, 24.0, 0, "cuda:0"),
    ]
    assert all(s.gpu.time_shared and s.gpu.compute_share == 0.5 for s in slots)


def job(job_id: str, due_in_h: float | None = None) -> PendingJob:
    deadline = NOW + timedelta(hours=due_in_h) if due_in_h is not None else None
    return PendingJob(job_id, 5, deadline, NOW, 16)


def shared(running: dict[int, RunningJob] | None = None) -> WorkerSnapshot:
    slots = tuple(
        GpuSlot("w", i, "l40s", 24, (running or {}).get(i), physical=0, time_shared=True)
        for i in range(2)
    )
    return WorkerSnapshot("w", slots)


def busy(deadline: bool) -> dict[int, RunningJob]:
    due = NOW + timedelta(hours=2) if deadline else None
    return {0: RunningJob("neighbour", 5, due, NOW - timedelta(minutes=5))}


def placed(jobs: list[PendingJob], worker: WorkerSnapshot) -> list[str]:
    return [a.job_id for a in schedule(jobs, [worker], NOW).assignments]


def test_jobs_without_deadlines_take_turns_on_a_gpu() -> None:
    assert placed([job("whenever")], shared(busy(deadline=False))) == ["whenever"]
    assert placed([job("a"), job("b")], shared()) == ["a", "b"]


def test_no_deadline_is_staked_on_the_sharing_pace() -> None:
    assert placed([job("due", due_in_h=3)], shared(busy(deadline=False))) == []
    assert placed([job("whenever")], shared(busy(deadline=True))) == []
    # A free GPU takes a deadline job; within the tick, no second job joins it.
    assert placed([job("due", due_in_h=3), job("whenever")], shared()) == ["due"]


def test_an_urgent_job_preempts_onto_a_shared_gpu_only_where_it_may_take_that_turn() -> None:
    urgent = PendingJob("urgent", 9, NOW + timedelta(hours=1), NOW, 16)
    lazy = {i: RunningJob(f"lazy-{i}", 1, None, NOW - timedelta(hours=1)) for i in range(2)}
    # Both turns busy: taking one leaves the deadline job beside the other.
    decisions = schedule([urgent], [shared(lazy)], NOW)
    assert decisions.preemptions == ()
    # One turn busy, the other free but held: the urgent job may take the busy one's place,
    # where it is alone once its victim is gone.
    alone = {0: lazy[0]}
    (preemption,) = schedule([urgent], [shared_held(alone)], NOW).preemptions
    assert preemption.victim_job_id == "lazy-0"


def shared_held(running: dict[int, RunningJob]) -> WorkerSnapshot:
    """Slot 1 is being freed for another job (a preemption already under way)."""
    slots = tuple(
        GpuSlot(
            "w",
            i,
            "l40s",
            24,
            running.get(i),
            reserved_for="other" if i == 1 else None,
            physical=0,
            time_shared=True,
        )
        for i in range(2)
    )
    return WorkerSnapshot("w", slots)


PREVIEW = Work("wan/wan2.1-t2v-1.3b", 448, 256, 17, 30)  # seconds of work on an L40S
LONG_14B = Work("wan/wan2.1-t2v-14b", 1280, 720, 81, 50)  # over an hour on an L40S alone


def test_a_deadline_joins_neighbours_where_every_job_still_meets_its_own() -> None:
    neighbour = {0: RunningJob("preview", 5, None, NOW, work=PREVIEW)}
    relaxed = replace(job("due", due_in_h=1), work=PREVIEW)
    assert placed([relaxed], shared(neighbour)) == ["due"]
    # The 14B render alone takes about 75 minutes: beside another it would take twice that.
    tight = replace(job("tight", due_in_h=1.5), work=LONG_14B)
    busy_14b = {0: RunningJob("other-14b", 5, None, NOW, work=LONG_14B)}
    assert placed([tight], shared(busy_14b)) == []
    # Nor does a job join a neighbour whose deadline it would push past.
    due_14b = {0: RunningJob("due-14b", 5, NOW + timedelta(hours=1.5), NOW, work=LONG_14B)}
    assert placed([replace(job("whenever"), work=LONG_14B)], shared(due_14b)) == []
    assert placed([replace(job("whenever"), work=PREVIEW)], shared(due_14b)) == ["whenever"]
