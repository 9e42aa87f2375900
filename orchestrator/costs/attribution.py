"""Where an instance's money went: its billed life, GPU by GPU, cut into what each moment was
for, then priced (pure: facts in, ledger lines out).

Per GPU, every billed second is exactly one of:
- work: an attempt's denoising and publishing, charged to its job (and the job's tags);
- startup: boot and agent start before the worker's first hello (or, without one, before
  its first attempt), and each attempt's model load (charged to that job);
- checkpoint: the attempt's checkpoint writes (charged to that job);
- lost: what an attempt did after its last durable checkpoint when it did not finish there
  (interrupted, died, failed): work done again by a later attempt (charged to that job);
- draining: empty time after the instance was asked to drain;
- idle: any other empty time, including the top-up to EC2's 60-second minimum.
An instance with several GPUs splits each second's price equally between them. Inside an
attempt only the durations are known, so its model load is placed first, then work, then
checkpoint writes, then the lost tail: exact for totals, approximate only for where a period
boundary cuts an attempt in two."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum

from kernel.job_spec import CostTags
from kernel.market import Market
from orchestrator.costs.money import SECONDS_PER_HOUR, seconds_of
from orchestrator.costs.pricing import PriceSchedule, billed_end
from orchestrator.store.cost_facts import AttemptSpan, InstanceLife, PoolKey

# A stage of a split render that ended with its checkpoint lost nothing either.
FINISHED_OUTCOMES = frozenset({"succeeded", "stage_done"})


class Category(StrEnum):
    WORK = "work"
    STARTUP = "startup"
    CHECKPOINT = "checkpoint"
    LOST = "lost"
    IDLE = "idle"
    DRAINING = "draining"


# Money that bought no video: paid for nothing (idle, draining) or for work done again (lost).
WASTE = frozenset({Category.LOST, Category.IDLE, Category.DRAINING})
# Money every run needs some of, kept as small as the policy can.
OVERHEAD = frozenset({Category.STARTUP, Category.CHECKPOINT})


@dataclass(frozen=True)
class CostLine:
    """One priced piece of one instance's time: a single category, job, price and UTC day."""

    instance_id: str
    pool: PoolKey
    category: Category
    job_id: str | None
    tags: CostTags | None
    start: datetime
    end: datetime
    gpu_seconds: Decimal
    instance_hours: Decimal  # the instance's hours this line pays for (its GPU's share)
    compute_usd: Decimal
    ebs_usd: Decimal
    on_demand_usd: Decimal  # the same time at the on-demand (list) price, compute only

    @property
    def usd(self) -> Decimal:
        return self.compute_usd + self.ebs_usd

    @property
    def market(self) -> Market:
        return self.pool[2]


@dataclass(frozen=True)
class Prices:
    compute: PriceSchedule
    on_demand_usd_per_hour: Decimal
    ebs_usd_per_hour: Decimal


@dataclass(frozen=True)
class _Piece:
    start: datetime
    end: datetime
    category: Category
    span: AttemptSpan | None = None


def instance_lines(
    life: InstanceLife,
    attempts: Sequence[AttemptSpan],
    prices: Prices,
    window: tuple[datetime, datetime],
    now: datetime,
) -> list[CostLine]:
    """The instance's lines inside `window` ([since, until)), its life billed up to `now`."""
    end = billed_end(life.launched_at, life.ended_at, now)
    since, until = max(window[0], life.launched_at), min(window[1], end)
    if until <= since:
        return []
    per_gpu = Decimal(1) / Decimal(max(life.gpus, 1))
    ready = _ready(life, attempts, end)
    lines: list[CostLine] = []
    for slot, part in _slots(life):
        on_gpu = sorted((a for a in attempts if a.holds(slot)), key=lambda a: a.started_at)
        for piece in _pieces(life, on_gpu, ready, end):
            start, stop = max(piece.start, since), min(piece.end, until)
            if stop > start:
                lines.extend(_priced(life, piece, start, stop, prices, per_gpu * part))
    return lines


# Less of a GPU than this left by its slots is the float rounding of sevenths, not a slice.
UNSPLIT_LEAST = Decimal("0.001")


def _slots(life: InstanceLife) -> list[tuple[int, Decimal]]:
    """Each slot and its part of a GPU: a GPU each; where MIG splits them, each MIG slot its
    part of its GPU, and what a GPU's slots leave of it a slot of its own that no attempt
    holds (idle: the operator's split leaves it unused). Slot numbers below 0 are those."""
    if not life.layout:
        return [(gpu, Decimal(1)) for gpu in range(max(life.gpus, 1))]
    slots = [(s.slot, Decimal(str(s.share))) for s in life.layout]
    for gpu in range(max(life.gpus, 1)):
        used = sum((Decimal(str(s.share)) for s in life.layout if s.physical == gpu), Decimal(0))
        if used < 1 - UNSPLIT_LEAST:
            slots.append((-1 - gpu, 1 - used))
    return slots


def _ready(life: InstanceLife, attempts: Sequence[AttemptSpan], end: datetime) -> datetime:
    if life.ready_at is not None:
        return life.ready_at
    return min((a.started_at for a in attempts), default=end)


def _pieces(
    life: InstanceLife, attempts: Sequence[AttemptSpan], ready: datetime, end: datetime
) -> list[_Piece]:
    pieces: list[_Piece] = []
    cursor = life.launched_at
    for span in attempts:
        start = max(span.started_at, cursor)
        stop = min(span.ended_at or end, end)
        if stop <= start:
            continue
        pieces.extend(_empty(cursor, start, ready, life.draining_at))
        pieces.extend(_inside(span, start, stop))
        cursor = stop
    pieces.extend(_empty(cursor, end, ready, life.draining_at))
    return pieces


def _empty(
    start: datetime, end: datetime, ready: datetime, draining: datetime | None
) -> list[_Piece]:
    """No attempt on this GPU: start-up until ready, draining once asked, idle otherwise."""
    bounds = sorted({start, end, *(t for t in (ready, draining) if t and start < t < end)})
    pieces = []
    for a, b in itertools.pairwise(bounds):
        if b <= ready:
            category = Category.STARTUP
        elif draining is not None and a >= draining:
            category = Category.DRAINING
        else:
            category = Category.IDLE
        pieces.append(_Piece(a, b, category))
    return pieces


def _inside(span: AttemptSpan, start: datetime, stop: datetime) -> list[_Piece]:
    loaded = min(start + timedelta(seconds=span.model_load_seconds), stop)
    if span.outcome is None or span.outcome in FINISHED_OUTCOMES:
        safe_until = stop  # running on, or finished: nothing lost
    else:
        safe_until = min(max(span.checkpointed_at or loaded, loaded), stop)
    writes = min(timedelta(seconds=span.checkpoint_seconds), safe_until - loaded)
    bounds = [
        (start, loaded, Category.STARTUP),
        (loaded, safe_until - writes, Category.WORK),
        (safe_until - writes, safe_until, Category.CHECKPOINT),
        (safe_until, stop, Category.LOST),
    ]
    return [_Piece(a, b, category, span) for a, b, category in bounds if b > a]


def _priced(
    life: InstanceLife,
    piece: _Piece,
    start: datetime,
    stop: datetime,
    prices: Prices,
    share: Decimal,
) -> list[CostLine]:
    lines = []
    for day_start, day_stop in _days(start, stop):
        for a, b, price in prices.compute.pieces(day_start, day_stop):
            hours = seconds_of(b - a) / SECONDS_PER_HOUR * share
            lines.append(
                CostLine(
                    instance_id=life.instance_id,
                    pool=life.pool,
                    category=piece.category,
                    job_id=piece.span.job_id if piece.span else None,
                    tags=piece.span.tags if piece.span else None,
                    start=a,
                    end=b,
                    gpu_seconds=seconds_of(b - a),
                    instance_hours=hours,
                    compute_usd=price * hours,
                    ebs_usd=prices.ebs_usd_per_hour * hours,
                    on_demand_usd=prices.on_demand_usd_per_hour * hours,
                )
            )
    return lines


def _days(start: datetime, stop: datetime) -> list[tuple[datetime, datetime]]:
    """[start, stop) cut at each UTC midnight."""
    spans = []
    cursor = start
    while cursor < stop:
        midnight = datetime(cursor.year, cursor.month, cursor.day, tzinfo=UTC) + timedelta(days=1)
        spans.append((cursor, min(midnight, stop)))
        cursor = min(midnight, stop)
    return spans
