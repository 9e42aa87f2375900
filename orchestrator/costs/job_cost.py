"""One job's cost so far, by category (waste included), across all its attempts: what
`framefleet job ID` prints and the API's job view shows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Protocol

from orchestrator.costs.attribution import WASTE, Category
from orchestrator.costs.ledger import CostLedger
from orchestrator.costs.money import ZERO
from orchestrator.store.cost_facts import AttemptSpan

S3_REQUESTS = "S3 requests"


class JobAttempts(Protocol):
    def attempts_of(self, job_id: str) -> Sequence[AttemptSpan]: ...


@dataclass(frozen=True)
class JobCostParts:
    """Full precision; round at presentation (`money.apportion`)."""

    by_category: dict[str, Decimal]  # category name (or S3_REQUESTS) -> USD, zeros left out

    @property
    def total(self) -> Decimal:
        return sum(self.by_category.values(), ZERO)

    @property
    def waste(self) -> Decimal:
        names = {category.value for category in WASTE}
        return sum((v for k, v in self.by_category.items() if k in names), ZERO)


def job_cost(
    attempts: JobAttempts, ledger: CostLedger, job_id: str, now: datetime
) -> JobCostParts | None:
    """None for a job that never ran."""
    spans = list(attempts.attempts_of(job_id))
    if not spans:
        return None
    since = min(s.started_at for s in spans)
    until = max((s.ended_at or now) for s in spans) + timedelta(seconds=1)
    period = ledger.period(since, until)
    parts = {c.value: ZERO for c in Category}
    for line in period.lines:
        if line.job_id == job_id:
            parts[line.category.value] += line.usd
    s3 = ledger.s3_usd([s for s in spans if s.job_id == job_id]).get(job_id, ZERO)
    return JobCostParts({k: v for k, v in parts.items() if v} | {S3_REQUESTS: s3})


def job_cost_so_far(
    attempts: JobAttempts, ledger: CostLedger, job_id: str, now: datetime
) -> Decimal | None:
    """What the job cost so far in all, for its cost limit; None for a job that never ran."""
    parts = job_cost(attempts, ledger, job_id, now)
    return None if parts is None else parts.total
