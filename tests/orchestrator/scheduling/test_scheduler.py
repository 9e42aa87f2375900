"""Table tests of the pure scheduler."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from orchestrator.control.scheduling_view import QueueReads
from orchestrator.scheduling.policy import schedule
from orchestrator.scheduling.snapshots import (
    GpuSlot,
    PendingJob,
    RunningJob,
    SchedulerSettings,
    WorkerSnapshot,
)

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def job(
    job_id: str,
    priority: int = 5,
    deadline_h: float | None = None,
    waited_h: float = 0.0,
    vram: float = 16,
    families: frozenset[str] = frozenset(),
) -> PendingJob:
    deadline = NOW + timedelta(hours=deadline_h) if deadline_h is not None else None
    return PendingJob(job_id, priority, deadline, NOW - timedelta(hours=waited_h), vram, families)


def test_deadline_jobs_take_on_demand_gpus_and_the_others_spot() -> None:
    spot = WorkerSnapshot("a-spot", (GpuSlot("a-spot", 0, "l40s", 48, spot=True),))
    on_demand = WorkerSnapshot("b-on-demand", (GpuSlot("b-on-demand", 0, "l40s", 48),))
    # Without the market preference the first in the queue would take the first worker.
    jobs = [job("due", priority=9, deadline_h=2), job("whenever", priority=5)]
    decisions = schedule(jobs, [spot, on_demand], NOW, SchedulerSettings(aging_per_hour=0))
    placed = {a.job_id: a.worker_id for a in decisions.assignments}
    assert placed == {"due": "b-on-demand", "whenever": "a-spot"}
    # A smaller GPU that fits still comes first: the market only breaks ties.
    small_spot = WorkerSnapshot("c-spot", (GpuSlot("c-spot", 0, "l4", 24, spot=True),))
    only = schedule([job("due", deadline_h=2)], [on_demand, small_spot], NOW)
    assert [a.worker_id for a in only.assignments] == ["c-spot"]


def worker(
    worker_id: str,
    gpus: int = 1,
    family: str = "l40s",
    vram: float = 48,
    running: dict[int, RunningJob] | None = None,
    accepting: bool = True,
) -> WorkerSnapshot:
    slots = tuple(GpuSlot(worker_id, i, family, vram, (running or {}).get(i)) for i in range(gpus))
    return WorkerSnapshot(worker_id, slots, accepting)


def running(job_id: str, priority: int, started_h_ago: float = 1.0) -> RunningJob:
    return RunningJob(job_id, priority, None, NOW - timedelta(hours=started_h_ago))


def assigned(decisions: object) -> list[tuple[str, str, int]]:
    return [(a.job_id, a.worker_id, a.gpu_index) for a in decisions.assignments]  # type: ignore[attr-defined]


def test_higher_priority_first_then_earliest_deadline_then_arrival() -> None:
    jobs = [
        job("low", priority=2),
        job("late", priority=7, deadline_h=10),
        job("soon", priority=7, deadline_h=1),
        job("no-deadline", priority=7),
        job("older", priority=7, waited_h=0.0001),
    ]
    decisions = schedule(jobs, [worker("w1", gpus=4)], NOW, SchedulerSettings(aging_per_hour=0))
    assert [a[0] for a in assigned(decisions)] == ["soon", "late", "older", "no-deadline"]


def test_aging_lets_a_long_waiting_low_priority_job_overtake() -> None:
    jobs = [job("fresh-urgent", priority=8), job("patient", priority=1, waited_h=9)]
    decisions = schedule(jobs, [worker("w1")], NOW, SchedulerSettings(aging_per_hour=1.0))
    assert assigned(decisions) == [("patient", "w1", 0)]


def test_gpu_fit_by_vram_and_family_and_smallest_fitting_gpu() -> None:
    workers = [
        worker("big", family="h100", vram=80),
        worker("mid", family="l40s", vram=48),
        worker("small", family="a10g", vram=24),
    ]
    jobs = [
        job("needs-64", vram=64),
        job("needs-20", vram=20),
        job("a100-only", vram=16, families=frozenset({"a100"})),
    ]
    decisions = schedule(jobs, workers, NOW)
    assert sorted(assigned(decisions)) == [("needs-20", "small", 0), ("needs-64", "big", 0)]


def test_one_job_per_gpu_so_an_eight_gpu_instance_runs_eight() -> None:
    jobs = [job(f"j{i}") for i in range(10)]
    decisions = schedule(jobs, [worker("p5", gpus=8, family="h100", vram=80)], NOW)
    placed = assigned(decisions)
    assert len(placed) == 8
    assert sorted(index for _, _, index in placed) == list(range(8))


def test_nothing_goes_to_a_worker_that_is_not_accepting() -> None:
    decisions = schedule([job("j")], [worker("draining", accepting=False)], NOW)
    assert decisions.assignments == ()
    assert decisions.preemptions == ()


def test_an_urgent_job_preempts_the_least_urgent_running_one() -> None:
    busy = worker(
        "w1", gpus=2, running={0: running("p4", priority=4), 1: running("p1", priority=1)}
    )
    decisions = schedule([job("urgent", priority=9)], [busy], NOW)
    assert decisions.assignments == ()
    [preemption] = decisions.preemptions
    assert (preemption.victim_job_id, preemption.gpu_index) == ("p1", 1)
    assert preemption.for_job_id == "urgent"


def test_no_preemption_within_the_margin_or_of_a_non_preemptible_job() -> None:
    close = worker("w1", running={0: running("p4", priority=4)})
    assert schedule([job("p5", priority=5)], [close], NOW).preemptions == ()
    protected = WorkerSnapshot(
        "w2", (GpuSlot("w2", 0, "l40s", 48, RunningJob("p0", 0, None, NOW, preemptible=False)),)
    )
    assert schedule([job("p9", priority=9)], [protected], NOW).preemptions == ()


def test_each_gpu_is_preempted_at_most_once_and_reserved_gpus_are_left_alone() -> None:
    busy = worker("w1", running={0: running("victim", priority=0)})
    decisions = schedule([job("a", priority=9), job("b", priority=9)], [busy], NOW)
    assert [p.for_job_id for p in decisions.preemptions] == ["a"]
    reserved = WorkerSnapshot(
        "w1", (GpuSlot("w1", 0, "l40s", 48, running("victim", 0), reserved_for="a"),)
    )
    again = schedule([job("a", priority=9), job("b", priority=9)], [reserved], NOW)
    assert again.assignments == ()
    assert again.preemptions == ()


def test_decisions_are_deterministic() -> None:
    jobs = [job(f"j{i}", priority=i % 3, deadline_h=i % 5 or None) for i in range(30)]
    workers = [worker(f"w{i}", gpus=2, vram=24 + 8 * i) for i in range(6)]
    assert schedule(jobs, workers, NOW) == schedule(list(reversed(jobs)), workers[::-1], NOW)


def test_the_gpu_bought_for_a_job_goes_to_that_job() -> None:
    bought = WorkerSnapshot("i-bought", (GpuSlot("i-bought", 0, "l40s", 48),))
    reserved = replace(job("waited-for-it", priority=3), reserved_on=frozenset({"i-bought"}))
    # Without the reservation the more urgent job would take the only GPU.
    decisions = schedule([job("urgent", priority=9), reserved], [bought], NOW)
    assert [(a.job_id, a.worker_id) for a in decisions.assignments] == [
        ("waited-for-it", "i-bought")
    ]
    assert "reserved for it" in decisions.assignments[0].reason


def test_a_job_bought_on_demand_capacity_stays_off_spot_gpus() -> None:
    spot = WorkerSnapshot("a-spot", (GpuSlot("a-spot", 0, "l40s", 48, spot=True),))
    tight = replace(job("tight", deadline_h=1), on_demand_only=True)
    assert schedule([tight], [spot], NOW).assignments == ()
    on_demand = WorkerSnapshot("b-on-demand", (GpuSlot("b-on-demand", 0, "l40s", 48),))
    [placed] = schedule([tight], [spot, on_demand], NOW).assignments
    assert placed.worker_id == "b-on-demand"


def test_a_job_due_sooner_is_not_preempted_for_one_due_later() -> None:
    due_soon = RunningJob("due-soon", 1, NOW + timedelta(hours=1), NOW)
    busy = worker("w", running={0: due_soon})
    for urgent in (job("no-deadline", priority=9), job("due-later", priority=9, deadline_h=3)):
        assert schedule([urgent], [busy], NOW).preemptions == ()
    [preempted] = schedule([job("due-first", priority=9, deadline_h=0.5)], [busy], NOW).preemptions
    assert preempted.victim_job_id == "due-soon"


def test_a_job_whose_instance_is_on_its_way_does_not_preempt() -> None:
    busy = worker("w", running={0: running("low", 1)})
    waiting = replace(job("urgent", priority=9), capacity_coming=True)
    assert schedule([waiting], [busy], NOW).preemptions == ()
    assert len(schedule([job("urgent", priority=9)], [busy], NOW).preemptions) == 1


def test_a_deadline_past_its_spot_until_takes_on_demand_gpus_only() -> None:
    spot = WorkerSnapshot("a-spot", (GpuSlot("a-spot", 0, "l40s", 48, spot=True),))
    on_demand = WorkerSnapshot("b-on-demand", (GpuSlot("b-on-demand", 0, "l40s", 48),))
    late = replace(job("late", deadline_h=2), spot_until=NOW - timedelta(minutes=1))
    assert schedule([late], [spot], NOW).assignments == ()
    assert [a.worker_id for a in schedule([late], [spot, on_demand], NOW).assignments] == [
        "b-on-demand"
    ]
    early = replace(late, spot_until=NOW + timedelta(minutes=1))
    assert [a.worker_id for a in schedule([early], [spot], NOW).assignments] == ["a-spot"]


def test_a_tick_reads_four_queued_jobs_per_free_gpu_within_bounds() -> None:
    assert [QueueReads().window(free) for free in (0, 10, 100, 499, 5000)] == [
        200,
        200,
        400,
        1996,
        2000,
    ]


def warm(worker_id: str, model: str | None, spot: bool = False, vram: float = 48) -> WorkerSnapshot:
    return WorkerSnapshot(
        worker_id, (GpuSlot(worker_id, 0, "l40s", vram, spot=spot, warm_model=model),)
    )


def test_a_job_prefers_the_gpu_that_holds_its_model_among_equals() -> None:
    fleet = [warm("a", None), warm("b", "wan/other"), warm("c", "wan/1.3b")]
    placed = schedule([replace(job("j"), model="wan/1.3b")], fleet, NOW).assignments
    assert [a.worker_id for a in placed] == ["c"]
    # No warm GPU for it: the usual order (the first worker).
    cold = schedule([replace(job("j"), model="wan/14b")], fleet, NOW).assignments
    assert [a.worker_id for a in cold] == ["a"]


def test_warmth_costs_no_priority_deadline_or_fit() -> None:
    settings = SchedulerSettings(aging_per_hour=0)
    # One free GPU, warm with the less urgent job's model: the more urgent job takes it.
    urgent, later = replace(job("urgent", priority=9), model="x"), replace(job("later"), model="y")
    decided = schedule([later, urgent], [warm("a", "y")], NOW, settings).assignments
    assert [(a.job_id, a.worker_id) for a in decided] == [("urgent", "a")]
    # A deadline job keeps to on-demand, even when a spot GPU holds its model.
    due = replace(job("due", deadline_h=2), model="x")
    fleet = [warm("a-spot", "x", spot=True), warm("b-on-demand", None)]
    assert [a.worker_id for a in schedule([due], fleet, NOW).assignments] == ["b-on-demand"]
    # The smallest GPU that fits still comes first: warmth only breaks ties between equals.
    small = replace(job("small", vram=16), model="x")
    fleet = [warm("a-big", "x", vram=80), warm("b-small", None, vram=24)]
    assert [a.worker_id for a in schedule([small], fleet, NOW).assignments] == ["b-small"]
