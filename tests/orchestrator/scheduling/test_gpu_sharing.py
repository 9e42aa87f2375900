"""The rule that lets a job join a GPU other jobs render on: by memory, and only where no job's
deadline breaks at the slowed pace."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.scheduling.gpu_sharing import (
    MEMORY_MARGIN_GIB,
    SharedGpu,
    SharingPace,
    SharingSample,
    Tenant,
    best_gpu_to_join,
    latency_share,
    pace_from,
    why_not_join,
)

NOW = datetime(2026, 12, 5, 12, tzinfo=UTC)
PACE = SharingPace()


def tenant(
    job_id: str,
    need: float = 10.0,
    step: float = 1.0,
    steps: int = 100,
    deadline_min: float | None = None,
    tokens: int = 2_240,
) -> Tenant:
    deadline = NOW + timedelta(minutes=deadline_min) if deadline_min is not None else None
    return Tenant(job_id, need, step, steps, deadline, tokens)


def test_small_jobs_pack_by_memory_until_the_gpu_is_full() -> None:
    gpu = SharedGpu("w", 0, 80.0, (tenant("a", 30), tenant("b", 30)))
    assert why_not_join(gpu, tenant("c", 18), NOW) is None
    refused = why_not_join(gpu, tenant("d", 20), NOW)
    assert refused is not None
    assert "GiB free" in refused


def test_a_small_neighbour_fills_the_gpus_idle_time_a_large_one_does_not() -> None:
    small = tenant("small", step=0.1, tokens=2_240)
    large = tenant("large", step=1.0, tokens=32_760)
    assert PACE.shared_step(small, (small, small)) < 2 * 0.1  # latency overlaps
    assert PACE.shared_step(large, (large, large)) == 2.0  # all compute: twice as long


def test_a_job_does_not_join_where_it_would_push_a_tenant_past_its_deadline() -> None:
    # 100 steps of 1 s alone, due in 2 minutes: one neighbour of the same size doubles that.
    due = tenant("due", steps=100, deadline_min=2, tokens=32_760)
    gpu = SharedGpu("w", 0, 80.0, (due,))
    refused = why_not_join(gpu, tenant("late", tokens=32_760), NOW)
    assert refused is not None
    assert "job due" in refused
    # With time to spare it may join.
    relaxed = SharedGpu("w", 0, 80.0, (tenant("due", steps=100, deadline_min=10),))
    assert why_not_join(relaxed, tenant("late", tokens=32_760), NOW) is None


def test_a_job_does_not_join_where_it_would_miss_its_own_deadline() -> None:
    gpu = SharedGpu("w", 0, 80.0, (tenant("busy", tokens=32_760),))
    refused = why_not_join(gpu, tenant("me", steps=100, deadline_min=2, tokens=32_760), NOW)
    assert refused is not None
    assert "make it miss" in refused


def test_the_gpu_where_the_job_is_slowed_least_wins() -> None:
    crowded = SharedGpu("a", 0, 80.0, (tenant("x", step=0.5), tenant("y", step=0.5)))
    quiet = SharedGpu("b", 0, 80.0, (tenant("z", step=0.1),))
    full = SharedGpu("c", 0, 24.0, (tenant("w", need=20),))
    chosen = best_gpu_to_join([crowded, full, quiet], tenant("new", step=0.1), NOW)
    assert chosen is quiet


tenants = st.builds(
    Tenant,
    job_id=st.text("abcdef", min_size=1, max_size=3),
    need_gib=st.floats(0.5, 40),
    seconds_per_step=st.floats(0.01, 5),
    steps_left=st.integers(1, 500),
    deadline=st.one_of(st.none(), st.integers(1, 600).map(lambda m: NOW + timedelta(minutes=m))),
    tokens=st.integers(100, 80_000),
)


@given(st.lists(tenants, max_size=4), tenants, st.sampled_from([24.0, 48.0, 80.0]))
def test_a_job_that_joins_fits_the_memory_and_breaks_no_deadline(
    residents: list[Tenant], joining: Tenant, memory: float
) -> None:
    gpu = SharedGpu("w", 0, memory, tuple(residents))
    if why_not_join(gpu, joining, NOW) is not None:
        return
    together = (*residents, joining)
    assert sum(t.need_gib for t in together) <= memory - MEMORY_MARGIN_GIB
    for t in together:
        if t.deadline is not None:
            seconds = t.steps_left * PACE.shared_step(t, together)
            assert NOW + timedelta(seconds=seconds) <= t.deadline


@given(st.lists(tenants, max_size=4), tenants)
def test_sharing_never_makes_a_step_faster_than_alone(
    residents: list[Tenant], joining: Tenant
) -> None:
    together = (*residents, joining)
    for t in together:
        assert PACE.shared_step(t, together) >= t.seconds_per_step


def test_the_pace_comes_from_the_gpus_measurements_the_least_gain_counted() -> None:
    # Alone 0.10 s; four together 0.22 s each: each step's compute is 0.04 s, its latency 0.06.
    four = SharingSample(tokens=2_240, alone=0.10, jobs=4, shared=0.22)
    assert latency_share(four) == pytest.approx(0.6)
    two = SharingSample(tokens=2_240, alone=0.10, jobs=2, shared=0.17)  # 0.3 overlaps
    large = SharingSample(tokens=32_760, alone=1.4, jobs=2, shared=2.8)  # nothing overlaps
    pace = pace_from([four, two, large])
    assert pace.small_latency_share == pytest.approx(0.3)
    assert pace_from([large]).small_latency_share == 0.0
    with pytest.raises(ValueError, match="two jobs"):
        latency_share(SharingSample(tokens=1, alone=0.1, jobs=1, shared=0.1))
