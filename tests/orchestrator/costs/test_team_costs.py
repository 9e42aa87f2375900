"""A team's bill: its jobs' lines (waste on them included) and attempts; the fleet's idle
time and other teams' jobs stay out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from kernel.job_spec import CostTags
from kernel.market import Market
from orchestrator.costs.attribution import Category, CostLine
from orchestrator.costs.ledger import LedgerPeriod
from orchestrator.costs.summary import summarize
from orchestrator.store.cost_facts import AttemptSpan, InstanceLife

START = datetime(2026, 12, 5, tzinfo=UTC)
POOL = ("g5.xlarge", "us-east-1a", Market.SPOT)


def line(instance: str, category: Category, usd: str, team: str | None) -> CostLine:
    tags = CostTags(team=team) if team else None
    job = f"{team}-job" if team else None
    return CostLine(
        instance,
        POOL,
        category,
        job,
        tags,
        START,
        START + timedelta(hours=1),
        Decimal(3600),
        Decimal(1),
        Decimal(usd),
        Decimal(0),
        Decimal(usd) * 3,
    )


def span(team: str, instance: str) -> AttemptSpan:
    return AttemptSpan(
        f"{team}-job",
        1,
        instance,
        0,
        START,
        START + timedelta(hours=1),
        "succeeded",
        0.0,
        0.0,
        0,
        None,
        CostTags(team=team),
        4.0,
        "wan/tiny",
    )


def life(instance: str) -> InstanceLife:
    return InstanceLife(instance, POOL, START, 1, "a10g", START, None, None, None)


def test_a_team_pays_for_its_jobs_only() -> None:
    period = LedgerPeriod(
        START,
        START + timedelta(days=1),
        [
            line("i-1", Category.WORK, "2.00", "red"),
            line("i-1", Category.LOST, "0.50", "red"),
            line("i-2", Category.WORK, "5.00", "blue"),
            line("i-3", Category.IDLE, "1.00", None),
        ],
        [life("i-1"), life("i-2"), life("i-3")],
        [span("red", "i-1"), span("blue", "i-2")],
    )
    red = summarize(period.of_teams(["red"]), {})
    assert red.total == Decimal("2.50")
    assert red.waste == Decimal("0.50")
    assert set(red.jobs) == {"red-job"}
    assert red.instances == 1
    assert ("team", "blue") not in red.by_tag
    assert summarize(period, {}).total == Decimal("8.50")
