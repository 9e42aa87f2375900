"""Jobs spanning several GPUs start as gangs: all their GPUs on one instance at once, or none,
and a gang that waits holds a whole worker instead of some GPUs, so no set of gangs can wait
on one another for ever."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.scheduling.gangs import GangGpu, GangJob, GangWorker, plan_gangs

NOW = datetime(2026, 12, 5, 12, tzinfo=UTC)


def worker(worker_id: str, gpus: int, busy: dict[int, float] | None = None) -> GangWorker:
    """`busy`: GPU -> minutes until its job ends."""
    ends = {i: NOW + timedelta(minutes=m) for i, m in (busy or {}).items()}
    return GangWorker(worker_id, tuple(GangGpu(i, "h100", 80.0, ends.get(i)) for i in range(gpus)))


def test_a_gang_takes_all_its_gpus_on_one_instance_at_once() -> None:
    plan = plan_gangs([GangJob("cp4", 4, 40)], [worker("a", 2), worker("b", 8)], NOW)
    assert plan.starts == {"cp4": ("b", (0, 1, 2, 3))}


def test_the_instance_left_with_the_fewest_free_gpus_is_chosen() -> None:
    plan = plan_gangs([GangJob("cp2", 2, 40)], [worker("big", 8), worker("small", 4)], NOW)
    assert plan.starts["cp2"][0] == "small"


def test_a_gang_that_cannot_start_holds_the_worker_that_frees_soonest_and_takes_nothing() -> None:
    workers = [worker("a", 4, {0: 30, 1: 30}), worker("b", 4, {0: 5, 1: 5, 2: 5})]
    plan = plan_gangs([GangJob("cp4", 4, 40)], workers, NOW)
    assert plan.starts == {}
    assert plan.holds == {"b": "cp4"}
    # A one-GPU job behind it may not take b's free GPU, but may take a's.
    behind = plan_gangs([GangJob("cp4", 4, 40), GangJob("one", 1, 16)], workers, NOW)
    assert behind.starts == {"one": ("a", (2,))}


def test_a_one_gpu_job_that_cannot_start_holds_nothing() -> None:
    plan = plan_gangs([GangJob("one", 1, 16)], [worker("a", 1, {0: 5})], NOW)
    assert plan.holds == {}
    assert plan.waits == {"one": "no free GPU that fits it"}


def test_a_gang_keeps_the_worker_it_held() -> None:
    workers = [worker("a", 4, {0: 5, 1: 5}), worker("b", 4, {0: 4, 1: 4})]
    plan = plan_gangs([GangJob("cp4", 4, 40)], workers, NOW, held_before={"a": "cp4"})
    assert plan.holds == {"a": "cp4"}


def test_a_gang_larger_than_any_instance_waits_with_the_reason() -> None:
    plan = plan_gangs([GangJob("cp8", 8, 40)], [worker("a", 4)], NOW)
    assert plan.waits == {"cp8": "no instance has 8 GPUs that fit it"}


gangs = st.lists(st.tuples(st.sampled_from([2, 4, 8]), st.integers(1, 6)), min_size=1, max_size=6)
fleets = st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=4)
# One-GPU jobs arriving each minute the whole run (0 to 3 a minute, each 1 to 6 minutes long):
# a stream that would take every GPU as it frees if nothing held a worker for the gangs.
streams = st.lists(st.tuples(st.integers(0, 3), st.integers(1, 6)), min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(gangs, fleets, streams)
def test_every_gang_starts_whole_and_no_gang_waits_for_ever(
    wanted: list[tuple[int, int]], sizes: list[int], stream: list[tuple[int, int]]
) -> None:
    """Minutes: each plans the queue (in arrival order) over the workers, then jobs run. Every
    gang no larger than the largest instance starts within a bound, with exactly its GPUs on
    one worker, all free when it starts, however many one-GPU jobs keep arriving behind it."""
    longest = 6
    queue = [GangJob(f"g{i}", gpus, 40) for i, (gpus, _) in enumerate(wanted)]
    minutes = {f"g{i}": length for i, (_, length) in enumerate(wanted)}
    busy: dict[tuple[str, int], datetime] = {}  # (worker, GPU) -> when its job ends
    holds: dict[str, str] = {}
    started: set[str] = set()
    now = NOW
    for tick in range((len(queue) + 1) * (longest + 2)):
        count, length = stream[tick % len(stream)]
        for n in range(count):
            queue.append(GangJob(f"s{tick}-{n}", 1, 40))
            minutes[f"s{tick}-{n}"] = length
        busy = {gpu: end for gpu, end in busy.items() if end > now}
        workers = [
            GangWorker(
                f"w{w}",
                tuple(GangGpu(i, "h100", 80.0, busy.get((f"w{w}", i))) for i in range(size)),
            )
            for w, size in enumerate(sizes)
        ]
        plan = plan_gangs(queue, workers, now, holds)
        for job_id, (worker_id, indexes) in plan.starts.items():
            job = next(j for j in queue if j.job_id == job_id)
            assert len(set(indexes)) == job.gpus
            assert all((worker_id, i) not in busy for i in indexes)
            for i in indexes:
                busy[(worker_id, i)] = now + timedelta(minutes=minutes[job_id])
        started |= set(plan.starts)
        queue = [j for j in queue if j.job_id not in plan.starts]
        holds = plan.holds
        now += timedelta(minutes=1)
    waiting = [g for g in queue if g.gpus > 1 and g.gpus <= max(sizes)]
    assert not waiting, f"gangs never started: {waiting}"
