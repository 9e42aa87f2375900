"""Where an instance's money went: every billed GPU-second in exactly one category, the
categories adding up to the instance's total, each job charged for its own time."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from kernel.job_spec import CostTags
from kernel.market import Market
from orchestrator.costs.attribution import Category, CostLine, Prices, instance_lines
from orchestrator.costs.money import apportion, cents
from orchestrator.costs.pricing import PriceSchedule
from orchestrator.store.cost_facts import AttemptSpan, InstanceLife, SlotShare

T0 = datetime(2023, 2, 15, 10, 0, tzinfo=UTC)
PRICE = Decimal("0.9")  # USD per hour: a cent per 40 seconds
ON_DEMAND = Decimal("3.06")


def minutes(n: float) -> datetime:
    return T0 + timedelta(minutes=n)


def life(
    gpus: int = 1,
    ended: float | None = 60.0,
    ready: float | None = 5.0,
    draining: float | None = None,
) -> InstanceLife:
    return InstanceLife(
        "i-0123456789abcdef0",
        ("p3.2xlarge", "us-east-1a", Market.SPOT),
        T0,
        gpus,
        "v100",
        minutes(ready) if ready is not None else None,
        minutes(draining) if draining is not None else None,
        minutes(ended) if ended is not None else None,
        "test",
    )


def attempt(
    job: str,
    start: float,
    end: float | None,
    outcome: str | None,
    *,
    gpu: int = 0,
    load: float = 0.0,
    writes: float = 0.0,
    checkpointed: float | None = None,
    team: str = "vfx",
) -> AttemptSpan:
    return AttemptSpan(
        job,
        1,
        "i-0123456789abcdef0",
        gpu,
        minutes(start),
        minutes(end) if end is not None else None,
        outcome,
        load * 60,
        writes * 60,
        1 if writes else 0,
        minutes(checkpointed) if checkpointed is not None else None,
        CostTags(team=team),
        5.0,
    )


def prices(schedule: PriceSchedule | None = None) -> Prices:
    return Prices(schedule or PriceSchedule.fixed(PRICE, T0), ON_DEMAND, Decimal(0))


def by_category(lines: list[CostLine]) -> dict[Category, Decimal]:
    totals: dict[Category, Decimal] = defaultdict(Decimal)
    for line in lines:
        totals[line.category] += line.usd
    return dict(totals)


def hours(n_minutes: float) -> Decimal:
    return PRICE * Decimal(str(n_minutes)) / 60


WINDOW = (T0 - timedelta(days=1), T0 + timedelta(days=1))


def test_every_minute_of_a_life_lands_in_one_category_and_they_add_up() -> None:
    spans = [
        # Loads the model for 2 minutes, works, writes 1 minute of checkpoints, finishes.
        attempt("job-a", 10, 30, "succeeded", load=2, writes=1),
        # Interrupted at 50 without a notice: its work after the checkpoint at 40 is lost.
        attempt("job-b", 32, 50, "queued", checkpointed=40),
    ]
    lines = instance_lines(life(draining=55), spans, prices(), WINDOW, minutes(120))
    got = by_category(lines)
    assert got == {
        Category.STARTUP: hours(5) + hours(2),  # boot to hello, then job-a's model load
        Category.IDLE: hours(5) + hours(2) + hours(5),  # before job-a, between, before drain
        Category.WORK: hours(17) + hours(8),
        Category.CHECKPOINT: hours(1),
        Category.LOST: hours(10),
        Category.DRAINING: hours(5),
    }
    assert sum(got.values()) == hours(60)
    assert sum(apportion(got).values()) == cents(hours(60))
    jobs = {line.job_id for line in lines if line.category is Category.LOST}
    assert jobs == {"job-b"}
    assert all(line.tags == CostTags(team="vfx") for line in lines if line.job_id)


def test_a_multi_gpu_instance_splits_each_second_between_its_gpus() -> None:
    spans = [attempt("job-a", 0, 60, "succeeded", gpu=0)]
    lines = instance_lines(life(gpus=4, ready=0), spans, prices(), WINDOW, minutes(120))
    got = by_category(lines)
    assert got[Category.WORK] == hours(60) / 4
    assert got[Category.IDLE] == hours(60) * 3 / 4
    assert sum(got.values()) == hours(60)


def test_a_job_that_spans_gpus_pays_for_every_gpu_it_holds() -> None:
    spanning = replace(attempt("job-a", 0, 60, "succeeded", gpu=1), span=(0, 3))
    lines = instance_lines(life(gpus=4, ready=0), [spanning], prices(), WINDOW, minutes(120))
    got = by_category(lines)
    assert got[Category.WORK] == hours(60) * 3 / 4
    assert got[Category.IDLE] == hours(60) / 4  # GPU 2, which it did not hold
    assert {line.job_id for line in lines if line.category is Category.WORK} == {"job-a"}


def test_a_mig_slot_pays_its_part_of_its_gpu_and_an_unused_part_is_idle() -> None:
    """GPU 0 split into a quarter, a quarter and a half-less-nothing (its operator left a
    quarter unused); GPU 1 whole. A job on the half slot pays half of GPU 0's share."""
    layout = (SlotShare(0, 0, 0.25), SlotShare(1, 0, 0.25), SlotShare(2, 1, 1.0))
    split = replace(life(gpus=2, ready=0), layout=layout)
    spans = [attempt("job-a", 0, 60, "succeeded", gpu=1)]
    lines = instance_lines(split, spans, prices(), WINDOW, minutes(120))
    got = by_category(lines)
    assert got[Category.WORK] == hours(60) / 2 / 4
    assert got[Category.IDLE] == hours(60) * 7 / 8  # slot 0, the unused half, GPU 1
    assert sum(got.values()) == hours(60)


def test_a_period_takes_only_its_own_seconds_and_lines_split_at_midnight() -> None:
    late = T0.replace(hour=23, minute=30)
    pool = ("p3.2xlarge", "us-east-1a", Market.SPOT)
    ended = late + timedelta(hours=1)
    instance = InstanceLife("i-0123456789abcdef0", pool, late, 1, "v100", late, None, ended, "")
    all_of_it = instance_lines(instance, [], prices(), WINDOW, late + timedelta(hours=2))
    assert {line.start.date() for line in all_of_it} == {
        late.date(),
        (late + timedelta(hours=1)).date(),
    }
    next_day = (late.replace(hour=0, minute=0) + timedelta(days=1), late + timedelta(days=2))
    second_half = instance_lines(instance, [], prices(), next_day, late + timedelta(hours=2))
    assert sum(line.usd for line in second_half) == PRICE / 2


def test_a_price_change_mid_attempt_prices_the_attempt_on_both_sides() -> None:
    schedule = PriceSchedule(((T0, PRICE), (minutes(30), PRICE * 2)))
    spans = [attempt("job-a", 0, 60, "succeeded")]
    lines = instance_lines(life(ready=0), spans, prices(schedule), WINDOW, minutes(120))
    work = [line for line in lines if line.category is Category.WORK]
    assert [line.compute_usd for line in work] == [hours(30), hours(30) * 2]
    assert all(line.on_demand_usd == ON_DEMAND / 2 for line in work)


def test_an_instance_that_never_came_up_is_all_start_up_and_pays_the_minimum() -> None:
    lines = instance_lines(life(ended=0.1, ready=None), [], prices(), WINDOW, minutes(10))
    assert by_category(lines) == {Category.STARTUP: hours(1)}  # 60 seconds billed
