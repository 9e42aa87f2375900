"""Jobs that span GPUs in the scheduler (`gang_round`): all GPUs of one worker at once or none,
a held worker takes no one-GPU job, the hold lasts across ticks until the worker empties, and
a team's quota counts every GPU of a span."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from orchestrator.scheduling.policy import schedule
from orchestrator.scheduling.quotas import TeamQuota
from orchestrator.scheduling.snapshots import (
    GpuSlot,
    PendingJob,
    RunningJob,
    SchedulerSettings,
    WorkerSnapshot,
)

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def job(job_id: str, gpus: int = 1, priority: int = 5, team: str | None = None) -> PendingJob:
    return PendingJob(job_id, priority, None, NOW, 40, gpus=gpus, team=team)


def worker(worker_id: str, gpus: int, busy: tuple[int, ...] = ()) -> WorkerSnapshot:
    started = NOW - timedelta(hours=1)
    slots = tuple(
        GpuSlot(
            worker_id,
            i,
            "l40s",
            48,
            RunningJob(f"{worker_id}-{i}", 5, None, started) if i in busy else None,
        )
        for i in range(gpus)
    )
    return WorkerSnapshot(worker_id, slots)


def test_a_spanning_job_takes_all_its_gpus_of_one_worker_and_the_rest_go_to_others() -> None:
    decisions = schedule(
        [job("big", gpus=4), job("a"), job("b")], [worker("w", 4), worker("v", 2)], NOW
    )
    spans = {a.job_id: (a.worker_id, (a.gpu_index, *a.span)) for a in decisions.assignments}
    assert spans["big"] == ("w", (0, 1, 2, 3))
    assert {spans["a"], spans["b"]} == {("v", (0,)), ("v", (1,))}


def test_a_held_worker_takes_no_small_job_until_the_span_fits_then_the_span_starts() -> None:
    busy = worker("w", 4, busy=(0, 1))
    first = schedule([job("big", gpus=4), job("small")], [busy], NOW)
    assert first.holds == {"w": "big"}
    assert first.assignments == ()  # "small" would have taken a free GPU of the held worker
    # Next tick: one GPU freed, the hold stands; then all four are free and the span starts.
    second = schedule(
        [job("big", gpus=4), job("small")],
        [worker("w", 4, busy=(1,))],
        NOW,
        held_before=first.holds,
    )
    assert second.holds == {"w": "big"}
    assert second.assignments == ()
    third = schedule(
        [job("big", gpus=4), job("small")], [worker("w", 4)], NOW, held_before=second.holds
    )
    assert [(a.job_id, a.gpu_index, a.span) for a in third.assignments] == [("big", 0, (1, 2, 3))]
    assert third.holds == {}


def test_a_span_no_worker_can_hold_waits_with_its_reason_and_blocks_nothing() -> None:
    decisions = schedule([job("huge", gpus=8), job("small")], [worker("w", 4)], NOW)
    assert [a.job_id for a in decisions.assignments] == ["small"]
    assert {w.job_id: w.reason for w in decisions.waits} == {
        "huge": "no instance has 8 GPUs that fit it"
    }


def test_a_team_quota_counts_every_gpu_of_a_span() -> None:
    quotas = {"vision": TeamQuota({"*": 3}, borrow=False)}
    settings = SchedulerSettings(quotas=quotas)
    refused = schedule([job("big", gpus=4, team="vision")], [worker("w", 4)], NOW, settings)
    assert refused.assignments == ()
    assert "quota" in refused.waits[0].reason
    quotas = {"vision": TeamQuota({"*": 5}, borrow=False)}
    allowed = schedule(
        [
            job("big", gpus=4, team="vision"),
            job("more", team="vision"),
            job("other", team="vision"),
        ],
        [worker("w", 4), worker("v", 2)],
        NOW,
        replace(settings, quotas=quotas),
    )
    assert sorted(a.job_id for a in allowed.assignments) == ["big", "more"]
