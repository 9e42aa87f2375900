"""A period's money, summed every way finance asks for it: by category (waste apart), by
market and day, by GPU family, pool and cost tag, by job, by model (a video's cost and a GPU
hour's); what the same work would have cost on on-demand alone, and the cost of a second of
finished video. Every sum of money is in cents allocated once at the line items
(costs/line_items.py), so every table adds up to the total and to each other; rates (per
video, per second, per GPU-hour) divide those cents."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal

from kernel.job_spec import CostTags
from kernel.market import Market
from orchestrator.costs.attribution import OVERHEAD, WASTE, Category, CostLine
from orchestrator.costs.ledger import LedgerPeriod
from orchestrator.costs.line_items import item_cents
from orchestrator.costs.money import ZERO, apportion

S3_ROW = "S3 requests"  # the S3 request charges' row in every table
FLEET = "(fleet)"
TAGS = (
    "team",
    "customer",
    "project",
)  # what no job caused: idle, draining, boot before the first hello
SPOT_ONLY = frozenset({Category.LOST, Category.CHECKPOINT})  # what on-demand would not pay


@dataclass
class JobCost:
    job_id: str
    team: str
    customer: str
    project: str
    model: str = ""
    by_category: dict[Category, Decimal] = field(default_factory=dict)
    s3_usd: Decimal = ZERO
    video_seconds: float = 0.0  # of its output, once it succeeded
    gpu_seconds: Decimal = ZERO  # of GPU time its lines paid for, waste included

    @property
    def total(self) -> Decimal:
        return sum(self.by_category.values(), ZERO) + self.s3_usd

    @property
    def waste(self) -> Decimal:
        return sum((v for k, v in self.by_category.items() if k in WASTE), ZERO)


@dataclass
class ModelCost:
    usd: Decimal = ZERO
    gpu_hours: Decimal = ZERO
    videos: int = 0
    video_seconds: float = 0.0  # finished

    @property
    def per_video_second(self) -> Decimal | None:
        return self.usd / Decimal(str(self.video_seconds)) if self.video_seconds > 0 else None

    @property
    def per_video(self) -> Decimal | None:
        return self.usd / self.videos if self.videos else None

    @property
    def per_gpu_hour(self) -> Decimal | None:
        return self.usd / self.gpu_hours if self.gpu_hours > 0 else None


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

    def shown(self, parts: Mapping[str, Decimal]) -> dict[str, Decimal]:
        """Parts of the total in cents, with the S3 row, adding up to the total's cents."""
        return apportion({**parts, S3_ROW: self.s3_usd})

    def category_cents(self) -> dict[str, Decimal]:
        """Every table and chart of categories shows these cents, in Category order."""
        return self.shown({c.value: self.by_category[c] for c in Category if c in self.by_category})

    def by_model(self) -> dict[str, ModelCost]:
        """Each model's cost, GPU-hours and finished videos (its jobs' lines, waste included;
        the fleet's idle time is nobody's model)."""
        models: dict[str, ModelCost] = {}
        for job in self.jobs.values():
            row = models.setdefault(job.model or "(unknown)", ModelCost())
            row.usd += job.total
            row.gpu_hours += job.gpu_seconds / 3600
            row.videos += job.video_seconds > 0
            row.video_seconds += job.video_seconds
        return models

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
    allocated = item_cents(period, s3_by_job)
    on_demand = ZERO
    for index, line in enumerate(period.lines):
        usd = allocated.line(index)  # cents, allocated once (costs/line_items.py)
        family = families.get(line.instance_id, "")
        by_category[line.category] += usd
        by_day_market[(line.start.date(), line.market)] += usd
        by_family[family] += usd
        by_pool[_pool_name(line)] += usd
        for tag, value in zip(TAGS, _tag_values(line.tags), strict=True):
            by_tag[(tag, value)] += usd
        if line.job_id is not None:
            job = jobs[line.job_id]
            job.by_category[line.category] = job.by_category.get(line.category, ZERO) + usd
            job.gpu_seconds += line.gpu_seconds
        if line.category not in SPOT_ONLY:
            on_demand += line.on_demand_usd + line.ebs_usd
    s3 = ZERO
    for job_id, usd in allocated.s3.items():
        if job_id in jobs:
            jobs[job_id].s3_usd += usd
            s3 += usd
            job = jobs[job_id]
            for tag, value in zip(TAGS, (job.team, job.customer, job.project), strict=True):
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
        since=period.since,
        until=period.until,
        instances_usd=sum(map(allocated.line, range(len(period.lines))), ZERO),
        s3_usd=s3,
        by_category=dict(by_category),
        by_day_market=dict(by_day_market),
        by_family=dict(by_family),
        by_pool=dict(by_pool),
        by_tag=dict(by_tag),
        jobs=jobs,
        on_demand_equivalent_usd=on_demand + s3,
        video_seconds=sum(seconds_by_family.values()),
        video_seconds_by_family=dict(seconds_by_family),
        instances=len(period.lives),
        incomplete=list(period.incomplete),
    )


def _jobs(period: LedgerPeriod) -> dict[str, JobCost]:
    jobs: dict[str, JobCost] = {}
    for span in period.attempts:
        if span.job_id not in jobs:
            jobs[span.job_id] = JobCost(span.job_id, *_tag_values(span.tags), model=span.model)
    return jobs


def _pool_name(line: CostLine) -> str:
    instance_type, zone, market = line.pool
    return f"{instance_type} {zone} {market.value}"


def _tag_values(tags: CostTags | None) -> tuple[str, str, str]:
    """Team, customer, project; FLEET for time no job caused."""
    if tags is None:
        return FLEET, FLEET, FLEET
    return tags.team or "", tags.customer or "", tags.project or ""
