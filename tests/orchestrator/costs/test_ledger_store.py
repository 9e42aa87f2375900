"""The ledger reads the store's facts, written through the product's paths, on SQLite and
PostgreSQL: what an instance and a job cost, and today's spend surviving a restart (the
budget reads it from there)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from kernel.clock import FakeClock
from kernel.market import Market
from kernel.worker_protocol import EventKind
from orchestrator.costs.attribution import Category
from orchestrator.costs.ledger import CostLedger, CostSettings
from orchestrator.costs.money import cents
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from tests.support.fleet_history import ON_DEMAND, SPOT, FleetHistory

NO_EBS = CostSettings(ebs_usd_per_gib_month=Decimal(0))


def categories(ledger: CostLedger, since: datetime, until: datetime) -> dict[Category, Decimal]:
    totals: dict[Category, Decimal] = {}
    for line in ledger.period(since, until).lines:
        totals[line.category] = totals.get(line.category, Decimal(0)) + line.usd
    return totals


def test_a_jobs_life_on_a_spot_instance_is_priced_and_attributed(
    store: JobStore, clock: FakeClock
) -> None:
    fleet = FleetHistory(store, clock)
    start = clock.now()
    fleet.price(SPOT)
    fleet.price(ON_DEMAND, Market.ON_DEMAND)
    instance = fleet.launch()
    fleet.submit("job-1")
    fleet.advance(300)
    fleet.ready(instance)
    fleet.assign("job-1", instance)
    fleet.event("job-1", EventKind.STARTED)
    fleet.advance(1200)
    fleet.checkpoint("job-1", 2, write_seconds=30.0)
    fleet.advance(1800)  # the spot price moves half way through the job's hour
    fleet.price(Decimal("1.224"))
    fleet.advance(600)
    fleet.finish("job-1", model_load_seconds=120.0)
    fleet.advance(60)
    fleet.end(instance)
    ledger = CostLedger(store.cost_facts, clock, NO_EBS)
    got = categories(ledger, start, clock.now() + timedelta(hours=1))
    first, second = SPOT / 3600, Decimal("1.224") / 3600
    assert got == {
        Category.STARTUP: (300 + 120) * first,
        # The attempt's hour: 3000 s at the first price, 600 s at the second.
        Category.WORK: (3000 - 120) * first + (600 - 30) * second,
        Category.CHECKPOINT: 30 * second,  # placed last in the attempt, after the change
        Category.IDLE: 60 * second,
    }
    period = ledger.period(start, clock.now())
    assert {line.job_id for line in period.lines if line.job_id} == {"job-1"}
    assert ledger.s3_usd(period.attempts) == {"job-1": Decimal("0.005") * 7 / 1000}


def test_a_restart_keeps_todays_spend(store: JobStore, clock: FakeClock, database_url: str) -> None:
    clock.advance((datetime(2026, 1, 1, 9, tzinfo=UTC) - clock.now()).total_seconds())
    fleet = FleetHistory(store, clock)
    fleet.price(ON_DEMAND, Market.ON_DEMAND)
    instance = fleet.launch(Market.ON_DEMAND)
    fleet.advance(2 * 3600)
    spent = CostLedger(store.cost_facts, clock, NO_EBS).spent_today()
    assert spent == 2 * ON_DEMAND
    # Another process on the same database (the autoscaler after a restart).
    reopened = JobStore(make_engine(database_url), clock)
    try:
        assert CostLedger(reopened.cost_facts, clock, NO_EBS).spent_today() == spent
        fleet.end(instance)
        clock.advance(3600)
        assert CostLedger(reopened.cost_facts, clock, NO_EBS).spent_today() == spent
        # Tomorrow starts at zero.
        clock.advance(14 * 3600)
        assert CostLedger(reopened.cost_facts, clock, NO_EBS).spent_today() == 0
    finally:
        reopened.dispose()


def test_the_earliest_reported_end_wins(store: JobStore, clock: FakeClock) -> None:
    fleet = FleetHistory(store, clock)
    fleet.price(SPOT)
    instance = fleet.launch()
    fleet.advance(600)
    ended = clock.now()
    fleet.end(instance, "EventBridge: terminated")
    fleet.advance(30)
    fleet.end(instance, "no longer listed by EC2")  # the reconcile, later
    (life,) = store.cost_facts.instance_lives(ended - timedelta(hours=1), clock.now())
    assert life.ended_at == ended
    assert life.end_reason == "EventBridge: terminated"
    total = (
        CostLedger(store.cost_facts, clock, NO_EBS)
        .period(ended - timedelta(hours=1), clock.now())
        .total
    )
    assert cents(total) == cents(SPOT / 6)
