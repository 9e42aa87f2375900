"""The cost ledger's facts in the store: instance lives as EC2 reported them, prices as they
changed, and the attempts that ran on each instance. The ledger (`orchestrator.costs`) prices
them; nothing here is money arithmetic."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal

from sqlalchemy import or_, update
from sqlmodel import Session, col, select

from kernel.fleet_facts import InstanceSeen, PriceSeen
from kernel.job_spec import CostTags
from kernel.market import Market
from orchestrator.store.base import StoreBase, in_chunks, utc
from orchestrator.store.tables import (
    AttemptGpuRow,
    InstanceLifeRow,
    JobAttemptRow,
    JobRow,
    PriceChangeRow,
)

PoolKey = tuple[str, str, Market]  # (instance type, availability zone, market)


@dataclass(frozen=True)
class SlotShare:
    """A MIG slot of an instance: which of its GPUs, and what part of that GPU's compute."""

    slot: int
    physical: int
    share: float


@dataclass(frozen=True)
class InstanceLife:
    instance_id: str
    pool: PoolKey
    launched_at: datetime
    gpus: int
    gpu_family: str
    ready_at: datetime | None  # its worker's first hello
    draining_at: datetime | None  # asked to drain before scale-in or after a rebalance notice
    ended_at: datetime | None
    end_reason: str | None
    layout: tuple[SlotShare, ...] = ()  # where MIG splits its GPUs; empty: a slot per GPU


@dataclass(frozen=True)
class AttemptSpan:
    job_id: str
    attempt: int
    instance_id: str
    gpu_index: int
    started_at: datetime
    ended_at: datetime | None
    outcome: str | None
    model_load_seconds: float
    checkpoint_seconds: float
    checkpoints: int
    checkpointed_at: datetime | None
    tags: CostTags
    video_seconds: float  # of the job's output
    model: str = ""  # the job's model (the report's cost per video by model)
    span: tuple[int, ...] = ()  # its other GPUs, for a job that spans several

    def holds(self, gpu: int) -> bool:
        return gpu == self.gpu_index or gpu in self.span


class CostFactBook(StoreBase):
    def record_instances_seen(self, seen: Sequence[InstanceSeen]) -> None:
        """Idempotent: an instance's first sighting is kept (EC2's launch time never moves)."""
        if not seen:
            return
        with self._session() as session:
            for instance in seen:
                if session.get(InstanceLifeRow, instance.instance_id) is None:
                    session.add(
                        InstanceLifeRow(
                            instance_id=instance.instance_id,
                            instance_type=instance.instance_type,
                            availability_zone=instance.availability_zone,
                            market=instance.market.value,
                            launched_at=instance.launched_at,
                            gpus=instance.gpus,
                            gpu_family=instance.gpu_family,
                        )
                    )
            session.commit()

    def record_instance_ready(
        self, instance_id: str, at: datetime, layout: Sequence[SlotShare] = ()
    ) -> None:
        """Its worker's first hello, and the MIG slots it offered; a later one changes
        nothing."""
        written = json.dumps([[s.slot, s.physical, s.share] for s in layout]) if layout else None
        with self._session() as session:
            session.exec(
                update(InstanceLifeRow)
                .where(col(InstanceLifeRow.instance_id) == instance_id)
                .where(col(InstanceLifeRow.ready_at).is_(None))
                .values(ready_at=at, gpu_layout=written)
            )
            session.commit()

    def record_instance_ended(self, instance_id: str, at: datetime, reason: str) -> None:
        with self._session() as session:
            end_instance_life(session, instance_id, at, reason)
            session.commit()

    def record_prices(self, prices: Sequence[PriceSeen]) -> None:
        """Each price is kept from its time on; a repeat of the price in effect is not."""
        if not prices:
            return
        with self._session() as session:
            for price in prices:
                latest = session.exec(
                    select(PriceChangeRow)
                    .where(col(PriceChangeRow.instance_type) == price.instance_type)
                    .where(col(PriceChangeRow.availability_zone) == price.availability_zone)
                    .where(col(PriceChangeRow.market) == price.market.value)
                    .where(col(PriceChangeRow.at) <= price.at)
                    .order_by(col(PriceChangeRow.at).desc())
                    .limit(1)
                ).first()
                if latest is not None and Decimal(latest.usd_per_hour) == price.usd_per_hour:
                    continue
                session.merge(
                    PriceChangeRow(
                        instance_type=price.instance_type,
                        availability_zone=price.availability_zone,
                        market=price.market.value,
                        at=price.at,
                        usd_per_hour=str(price.usd_per_hour),
                    )
                )
            session.commit()

    def instance_lives(self, since: datetime, until: datetime) -> list[InstanceLife]:
        """Every instance alive at some moment of [since, until)."""
        with self._session() as session:
            rows = session.exec(
                select(InstanceLifeRow)
                .where(col(InstanceLifeRow.launched_at) < until)
                .where(
                    or_(
                        col(InstanceLifeRow.ended_at).is_(None),
                        col(InstanceLifeRow.ended_at) > since,
                    )
                )
                .order_by(col(InstanceLifeRow.launched_at))
            ).all()
        return [_life(row) for row in rows]

    def price_changes(
        self, pools: Sequence[PoolKey], until: datetime
    ) -> dict[PoolKey, list[tuple[datetime, Decimal]]]:
        """Each pool's price changes up to `until`, oldest first."""
        history: dict[PoolKey, list[tuple[datetime, Decimal]]] = {}
        with self._session() as session:
            for pool in set(pools):
                instance_type, zone, market = pool
                rows = session.exec(
                    select(PriceChangeRow)
                    .where(col(PriceChangeRow.instance_type) == instance_type)
                    .where(col(PriceChangeRow.availability_zone) == zone)
                    .where(col(PriceChangeRow.market) == market.value)
                    .where(col(PriceChangeRow.at) < until)
                    .order_by(col(PriceChangeRow.at))
                ).all()
                history[pool] = [(utc(r.at), Decimal(r.usd_per_hour)) for r in rows]
        return history

    def attempts_of(self, job_id: str) -> list[AttemptSpan]:
        with self._session() as session:
            rows = session.exec(
                select(JobAttemptRow, JobRow)
                .join(JobRow, col(JobRow.job_id) == col(JobAttemptRow.job_id))
                .where(col(JobAttemptRow.job_id) == job_id)
            ).all()
        return [self._span_of(attempt, job) for attempt, job in rows]

    def _span_of(self, attempt: JobAttemptRow, job: JobRow) -> AttemptSpan:
        spec = self._cached_record(job).spec
        return _span(attempt, spec.tags, spec.num_frames / spec.fps, spec.model)

    def attempts_on(self, instance_ids: Sequence[str]) -> list[AttemptSpan]:
        spans: list[AttemptSpan] = []
        with self._session() as session:
            for chunk in in_chunks(instance_ids):
                rows = session.exec(
                    select(JobAttemptRow, JobRow)
                    .join(JobRow, col(JobRow.job_id) == col(JobAttemptRow.job_id))
                    .where(col(JobAttemptRow.worker_id).in_(chunk))
                ).all()
                span = self._span_gpus(session, chunk)
                spans.extend(
                    replace(
                        self._span_of(attempt, job),
                        span=span.get((attempt.job_id, attempt.attempt), ()),
                    )
                    for attempt, job in rows
                )
        return spans

    @staticmethod
    def _span_gpus(
        session: Session, workers: Sequence[str]
    ) -> dict[tuple[str, int], tuple[int, ...]]:
        """(job, attempt) -> the GPUs besides its lead one that an attempt on these workers
        held: only spanning attempts have any, so only their rows are read."""
        rows = session.exec(
            select(AttemptGpuRow)
            .join(
                JobAttemptRow,
                (col(JobAttemptRow.job_id) == col(AttemptGpuRow.job_id))
                & (col(JobAttemptRow.attempt) == col(AttemptGpuRow.attempt)),
            )
            .where(col(AttemptGpuRow.worker_id).in_(list(workers)))
            .where(col(AttemptGpuRow.gpu_index) != col(JobAttemptRow.gpu_index))
        ).all()
        held: dict[tuple[str, int], list[int]] = {}
        for row in rows:
            held.setdefault((row.job_id, row.attempt), []).append(row.gpu_index)
        return {key: tuple(sorted(gpus)) for key, gpus in held.items()}


def end_instance_life(session: Session, instance_id: str, at: datetime, reason: str) -> None:
    """The earliest end anyone reported wins (EventBridge's time beats a later sighting)."""
    session.exec(
        update(InstanceLifeRow)
        .where(col(InstanceLifeRow.instance_id) == instance_id)
        .where(or_(col(InstanceLifeRow.ended_at).is_(None), col(InstanceLifeRow.ended_at) > at))
        .values(ended_at=at, end_reason=reason[:500])
    )


def _life(row: InstanceLifeRow) -> InstanceLife:
    return InstanceLife(
        instance_id=row.instance_id,
        pool=(row.instance_type, row.availability_zone, Market(row.market)),
        launched_at=utc(row.launched_at),
        gpus=row.gpus,
        gpu_family=row.gpu_family,
        ready_at=utc(row.ready_at) if row.ready_at else None,
        draining_at=utc(row.draining_at) if row.draining_at else None,
        ended_at=utc(row.ended_at) if row.ended_at else None,
        end_reason=row.end_reason,
        layout=_layout(row.gpu_layout),
    )


def _layout(written: str | None) -> tuple[SlotShare, ...]:
    """What `record_instance_ready` wrote (the control plane's own, from a checked hello)."""
    if not written:
        return ()
    return tuple(SlotShare(int(a), int(b), float(c)) for a, b, c in json.loads(written))


def _span(row: JobAttemptRow, tags: CostTags, video_seconds: float, model: str) -> AttemptSpan:
    return AttemptSpan(
        job_id=row.job_id,
        attempt=row.attempt,
        instance_id=row.worker_id or "",
        gpu_index=row.gpu_index or 0,
        started_at=utc(row.started_at),
        ended_at=utc(row.ended_at) if row.ended_at else None,
        outcome=row.outcome,
        model_load_seconds=row.model_load_seconds,
        checkpoint_seconds=row.checkpoint_seconds,
        checkpoints=row.checkpoints,
        checkpointed_at=utc(row.checkpointed_at) if row.checkpointed_at else None,
        tags=tags,
        video_seconds=video_seconds,
        model=model,
    )
