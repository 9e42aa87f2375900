"""A whole simulated week on the real V100 traces, run by the product: the ledger prices what
the simulated EC2 billed, to a tenth of a cent per instance (the ledger rounds lives up to
whole seconds); every instance's categories add up to its total to the cent; the week's
report and FOCUS export agree with the ledger to the cent."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

from autoscaler.market.trace import load_trace
from orchestrator.costs.attribution import Category
from orchestrator.costs.focus import focus_rows
from orchestrator.costs.money import SECONDS_PER_HOUR, apportion, cents, seconds_of
from orchestrator.costs.periods import Period
from orchestrator.costs.pricing import PriceSchedule, billed_end, ebs_per_hour
from orchestrator.costs.summary import summarize
from simulator.fleet import FleetSimulation
from simulator.fleet_setup import setup_for_changeover
from simulator.workload import daily_poisson
from tests.support.paths import TEST_TRACES

# The first 8.1 days of ../shared/traces/aws-v100-availability-2023-02-15, all nine zones.
REAL_TRACES = TEST_TRACES / "v100-week"


async def test_a_simulated_week_on_the_real_traces_adds_up_to_the_cent(tmp_path: Path) -> None:
    trace = load_trace(REAL_TRACES)
    # Half the interruptions without a usable notice, so the week has lost work to account.
    setup = replace(setup_for_changeover(0.2), silent_share=0.5)
    simulation = FleetSimulation(trace, daily_poisson(25, 7, seed=7), setup, 0, tmp_path / "db")
    try:
        await simulation.run()
        # The control plane's stall watch and quarantine ran all week on healthy workers:
        # no job was found stalled and no GPU quarantined (no false positive).
        assert simulation.store.faults.gpu_faults() == []
        assert not any(
            "stalled" in e.reason
            for j in simulation.jobs
            for e in simulation.store.history(j.job_id)
        )
        week = (trace.start, trace.start + timedelta(days=8))
        period = simulation.ledger.period(*week)
        lives = {life.instance_id: life for life in period.lives}
        assert set(lives) == set(simulation.cloud.records)
        by_instance: dict[str, dict[Category, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
        compute: dict[str, Decimal] = defaultdict(Decimal)
        for line in period.lines:
            by_instance[line.instance_id][line.category] += line.usd
            compute[line.instance_id] += line.compute_usd
        categories = {c for parts in by_instance.values() for c in parts}
        assert {Category.WORK, Category.STARTUP, Category.CHECKPOINT, Category.LOST} <= categories
        costs = simulation.ledger.settings
        ebs = ebs_per_hour(costs.ebs_gib, costs.ebs_usd_per_gib_month)
        for instance_id, record in simulation.cloud.records.items():
            life = lives[instance_id]
            assert abs(float(compute[instance_id]) - record.cost) < 1e-3, instance_id
            parts = by_instance[instance_id]
            total = sum(parts.values(), Decimal(0))
            assert sum(apportion(parts).values()) == cents(total)
            # The parts are the whole: the life priced in one piece costs the same.
            billed = billed_end(life.launched_at, life.ended_at, simulation.clock.now())
            prices = simulation.store.cost_facts.price_changes([life.pool], billed)[life.pool]
            hours = seconds_of(billed - life.launched_at) / SECONDS_PER_HOUR
            whole = PriceSchedule(tuple(prices)).cost(life.launched_at, billed) + ebs * hours
            assert abs(total - whole) < Decimal("1e-12"), instance_id
        s3 = simulation.ledger.s3_usd(period.attempts)
        summary = summarize(period, s3)
        focus = list(focus_rows(period, s3, "acct"))
        focus_total = sum((Decimal(row["BilledCost"]) for row in focus), Decimal(0))
        assert cents(focus_total) == cents(summary.total)
        shown = apportion(
            {c.value: v for c, v in summary.by_category.items()} | {"s3": summary.s3_usd}
        )
        assert sum(shown.values()) == cents(summary.total)
        assert summary.savings > 0
        assert Period("week", *week).label
    finally:
        simulation.store.dispose()
