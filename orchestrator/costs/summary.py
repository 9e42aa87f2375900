"""A period's money, summed every way finance asks for it: by category (waste apart), by
market and day, by GPU family, pool and cost tag, by job; what the same work would have cost
on on-demand alone, and the cost of a second of finished video. Full precision throughout;
`money.apportion` rounds at presentation."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal

from kernel.market import Market
from orchestrator.costs.attribution import OVERHEAD, WASTE, Category, CostLine
from orchestrator.costs.ledger import LedgerPeriod
from orchestrator.costs.money import ZERO

S3_ROW = "S3 requests"  # the S3 request charges' row in every table
FLEET = "(fleet)"  # what no job caused: idle, draining, boot before the first hello
SPOT_ONLY = frozenset({Category.LOST, Category.CHECKPOINT})  # what on-demand would not pay


@dataclass
class JobCost:
    job_id: str
    team: str
    customer: str
    project: str
    by_category: dict[Category, Decimal] = field(default_factory=dict)
    s3_usd: Decimal = ZERO
    video_seconds: float = 0.0  # of its output, once it succeeded

    @property
    def total(self) -> Decimal:
        return sum(self.by_category.values(), ZERO) + self.s3_usd

    @property
    def waste(self) -> Decimal:
        return sum((v for k, v in self.by_category.items() if k in WASTE), ZERO)


@dataclass
class CostSummary:
    since: datetime
    until: datetime
    instances_usd: Decimal
    s3_usd: Decimal
    by_category: dict[Category, Decimal]
    by_day_market: dict[tuple[date, Market], Decimal]
    by_family: dict[str, Decimal]
    by_pool: dict[str, Decimal]
    by_tag: dict[tuple[str, str], Decimal]  # (tag, value) -> USD; FLEET for untagged time
    jobs: dict[str, JobCost]
    on_demand_equivalent_usd: Decimal
    video_seconds: float
    video_seconds_by_family: dict[str, float]
    instances: int
    incomplete: list[str]

    @property
    def total(self) -> Decimal:
        return self.instances_usd + self.s3_usd

    @property
    def waste(self) -> Decimal:
        return sum((v for k, v in self.by_category.items() if k in WASTE), ZERO)

    @property
    def overhead(self) -> Decimal:
        return sum((v for k, v in self.by_category.items() if k in OVERHEAD), ZERO)

    @property
    def savings(self) -> Decimal:
        return self.on_demand_equivalent_usd - self.total

    def usd_per_video_second(self, family: str | None = None) -> Decimal | None:
        seconds = (
            self.video_seconds if family is None else self.video_seconds_by_family.get(family, 0)
        )
        spent = self.total if family is None else self.by_family.get(family, ZERO)
        return spent / Decimal(str(seconds)) if seconds > 0 else None


def summarize(period: LedgerPeriod, s3_by_job: dict[str, Decimal]) -> CostSummary:
    by_category: dict[Category, Decimal] = defaultdict(lambda: ZERO)
    by_day_market: dict[tuple[date, Market], Decimal] = defaultdict(lambda: ZERO)
    by_family: dict[str, Decimal] = defaultdict(lambda: ZERO)
    by_pool: dict[str, Decimal] = defaultdict(lambda: ZERO)
    by_tag: dict[tuple[str, str], Decimal] = defaultdict(lambda: ZERO)
    families = {life.instance_id: life.gpu_family for life in period.lives}
    jobs = _jobs(period)
    on_demand = ZERO
    for line in period.lines:
        family = families.get(line.instance_id, "")
        by_category[line.category] += line.usd
        by_day_market[(line.start.date(), line.market)] += line.usd
        by_family[family] += line.usd
        by_pool[_pool_name(line)] += line.usd
        for tag, value in _tags_of(line):
            by_tag[(tag, value)] += line.usd
        if line.job_id is not None:
            job = jobs[line.job_id]
            job.by_category[line.category] = job.by_category.get(line.category, ZERO) + line.usd
        if line.category not in SPOT_ONLY:
            on_demand += line.on_demand_usd + line.ebs_usd
    s3 = ZERO
    for job_id, usd in s3_by_job.items():
        if job_id in jobs:
            jobs[job_id].s3_usd += usd
            s3 += usd
            for tag, value in _job_tags(jobs[job_id]):
                by_tag[(tag, value)] += usd
    seconds_by_family: dict[str, float] = defaultdict(float)
    for span in period.attempts:
        if (
            span.outcome == "succeeded"
            and period.since <= (span.ended_at or period.until) < period.until
        ):
            jobs[span.job_id].video_seconds = span.video_seconds
            seconds_by_family[families.get(span.instance_id, "")] += span.video_seconds
    return CostSummary(
        since=period.since, until=period.until, instances_usd=period.total, s3_usd=s3,
        by_category=dict(by_category), by_day_market=dict(by_day_market),
        by_family=dict(by_family), by_pool=dict(by_pool), by_tag=dict(by_tag), jobs=jobs,
        on_demand_equivalent_usd=on_demand + s3,
        video_seconds=sum(seconds_by_family.values()),
        video_seconds_by_family=dict(seconds_by_family), instances=len(period.lives),
        incomplete=list(period.incomplete),
    )  # fmt: skip


def _jobs(period: LedgerPeriod) -> dict[str, JobCost]:
    jobs: dict[str, JobCost] = {}
    for span in period.attempts:
        if span.job_id not in jobs:
            tags = span.tags
            jobs[span.job_id] = JobCost(span.job_id, tags.team or "", tags.customer or "",
                                        tags.project or "")  # fmt: skip
    return jobs


def _pool_name(line: CostLine) -> str:
    instance_type, zone, market = line.pool
    return f"{instance_type} {zone} {market.value}"


def _tags_of(line: CostLine) -> Iterable[tuple[str, str]]:
    tags = line.tags
    if tags is None:
        return [("team", FLEET), ("customer", FLEET), ("project", FLEET)]
    return [("team", tags.team or ""), ("customer", tags.customer or ""),
            ("project", tags.project or "")]  # fmt: skip


def _job_tags(job: JobCost) -> list[tuple[str, str]]:
    return [("team", job.team), ("customer", job.customer), ("project", job.project)]
