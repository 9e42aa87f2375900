"""Pure builders of what the API and the console show: a job's summary and detail, its
estimated finish and deadline risk, the fleet, the money. No I/O: callers read the store."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal

from kernel.job_record import JobEvent, JobRecord, Placement, Reservation
from kernel.job_state import ACTIVE_STATES, JobState
from orchestrator.api.models import (
    AttemptView,
    CostsView,
    CostView,
    DeadlineRisk,
    FleetInstance,
    HistoryLine,
    JobDetail,
    JobSummary,
    ProgressView,
    TagCost,
    Tags,
)
from orchestrator.costs.job_cost import JobCostParts
from orchestrator.costs.money import ZERO
from orchestrator.costs.summary import CostSummary
from orchestrator.store.cost_facts import InstanceLife, PoolKey
from orchestrator.store.job_pages import AttemptFacts, PageCursor, StoredProgress

# With no estimate, a deadline this near is a risk (the metrics' at-risk window).
NEAR = timedelta(minutes=30)


def estimated_finish(
    job: JobRecord,
    progress: StoredProgress | None,
    reservation: Reservation | None,
    now: datetime,
) -> datetime | None:
    """From the running attempt's measured pace; for a job not running yet, from the pace the
    autoscaler planned with, plus the start-up and one interruption it allowed for."""
    if job.state.terminal:
        return None
    if job.state in ACTIVE_STATES and progress is not None and progress.attempt == job.attempt:
        pace = progress.seconds_per_step()
        if pace is not None:
            left = max(0, progress.total_steps - progress.step)
            return progress.reported_at + timedelta(seconds=left * pace)
    if reservation is not None and reservation.seconds_per_step > 0:
        left = job.spec.steps - job.checkpoint_step
        seconds = left * reservation.seconds_per_step + reservation.margin_seconds
        return now + timedelta(seconds=seconds)
    return None


def deadline_risk(job: JobRecord, finish: datetime | None, now: datetime) -> DeadlineRisk:
    deadline = job.deadline
    if deadline is None:
        return DeadlineRisk.NONE
    if job.state is JobState.SUCCEEDED:
        return DeadlineRisk.MET if job.updated_at <= deadline else DeadlineRisk.MISSED
    if job.state.terminal:
        return DeadlineRisk.NONE
    if now > deadline:
        return DeadlineRisk.LATE
    if finish is not None:
        return DeadlineRisk.AT_RISK if finish > deadline else DeadlineRisk.ON_TRACK
    return DeadlineRisk.AT_RISK if deadline - now < NEAR else DeadlineRisk.UNKNOWN


def summary(job: JobRecord, risk: DeadlineRisk) -> JobSummary:
    tags = job.spec.tags
    return JobSummary(
        job_id=job.job_id,
        state=job.state,
        priority=job.priority,
        model=job.spec.model,
        deadline=job.deadline,
        deadline_risk=risk,
        attempt=job.attempt,
        created_at=job.created_at,
        updated_at=job.updated_at,
        tags=Tags(team=tags.team, customer=tags.customer, project=tags.project),
    )


def money(amount: Decimal) -> str:
    return str(amount.quantize(Decimal("0.000001")))


def cost_view(parts: JobCostParts | None) -> CostView | None:
    if parts is None:
        return None
    return CostView(
        total_usd=money(parts.total),
        waste_usd=money(parts.waste),
        by_category={name: money(usd) for name, usd in parts.by_category.items()},
    )


def detail(
    job: JobRecord,
    history: Sequence[JobEvent],
    attempts: Sequence[AttemptFacts],
    progress: StoredProgress | None,
    reservation: Reservation | None,
    cost: JobCostParts | None,
    now: datetime,
) -> JobDetail:
    finish = estimated_finish(job, progress, reservation, now)
    shown = progress if progress is not None and progress.attempt == job.attempt else None
    return JobDetail(
        job_id=job.job_id,
        state=job.state,
        spec=job.spec,
        attempt=job.attempt,
        # The store's records carry these fields under the same names.
        attempts=[AttemptView.model_validate(a) for a in attempts],
        history=[HistoryLine.model_validate(e) for e in history],
        last_checkpoint=job.last_checkpoint,
        checkpoint_step=job.checkpoint_step,
        stage=job.stage,
        waiting_for=job.waiting_for,
        progress=None
        if shown is None
        else ProgressView(
            attempt=shown.attempt,
            step=shown.step,
            total_steps=shown.total_steps,
            reported_at=shown.reported_at,
            seconds_per_step=shown.seconds_per_step(),
        ),
        estimated_finish=finish,
        deadline_risk=deadline_risk(job, finish, now),
        cost=cost_view(cost),
    )


def fleet_instances(
    lives: Sequence[InstanceLife],
    prices: dict[PoolKey, list[tuple[datetime, Decimal]]],
    placements: Sequence[Placement],
) -> list[FleetInstance]:
    """The instances alive, each with its price now and the jobs on it."""
    jobs: dict[str, list[str]] = {}
    for placement in placements:
        jobs.setdefault(placement.worker_id, []).append(placement.job.job_id)
    shown = []
    for life in lives:
        history = prices.get(life.pool) or []
        state = "draining" if life.draining_at else "running" if life.ready_at else "booting"
        instance_type, zone, market = life.pool
        shown.append(
            FleetInstance(
                instance_id=life.instance_id,
                instance_type=instance_type,
                availability_zone=zone,
                market=market.value,
                usd_per_hour=money(history[-1][1]) if history else None,
                state=state,
                launched_at=life.launched_at,
                gpus=life.gpus,
                jobs=sorted(jobs.get(life.instance_id, [])),
            )
        )
    return shown


def fleet_usd_per_hour(instances: Sequence[FleetInstance]) -> str:
    return money(sum((Decimal(i.usd_per_hour) for i in instances if i.usd_per_hour), ZERO))


def costs_view(summary_: CostSummary, incomplete: Sequence[str]) -> CostsView:
    categories = {c.value: v for c, v in summary_.by_category.items() if v}
    return CostsView(
        since=summary_.since,
        until=summary_.until,
        total_usd=money(summary_.total),
        waste_usd=money(summary_.waste),
        on_demand_equivalent_usd=money(summary_.on_demand_equivalent_usd),
        savings_usd=money(summary_.savings),
        by_category={name: money(usd) for name, usd in categories.items()},
        by_tag=[
            TagCost(tag=tag, value=value, usd=money(usd))
            for (tag, value), usd in sorted(summary_.by_tag.items())
        ],
        incomplete=list(incomplete),
    )


def encode_cursor(job: JobRecord) -> str:
    raw = f"{job.created_at.isoformat()}|{job.job_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(text: str) -> PageCursor | None:
    """None for anything that is not a cursor this API gave out."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
        created, job_id = raw.split("|", 1)
        moment = datetime.fromisoformat(created)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None
    # A NUL reaches PostgreSQL as an error, not a miss: no id the API gave out holds one.
    if moment.tzinfo is None or not job_id or len(job_id) > 128 or "\x00" in job_id:
        return None
    return PageCursor(moment, job_id)
