"""The one record of each instance (`kernel.instance_state`), which the autoscaler and every
control-plane replica write through the same moves: drains, spot warnings, terminations and
ends. A move that the state machine does not allow from where the instance is (a late drain of
an instance already gone) changes nothing; the first report of an end is the one kept."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import Engine, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from kernel.clock import Clock
from kernel.instance_state import (
    NOT_WELCOME,
    InstanceChange,
    InstanceState,
    InstanceStatus,
    may_move,
)
from kernel.instance_types import InstanceKind
from kernel.job_record import DrainKind, DrainRequest
from kernel.job_spec import JobSpec
from kernel.market import Market
from orchestrator.store.base import StoreBase, utc
from orchestrator.store.cost_facts import end_instance_life
from orchestrator.store.instance_kinds import InstanceKindBook
from orchestrator.store.tables import InstanceChangeRow, InstanceLifeRow, InstanceRow

_DRAINS = (InstanceState.DRAINING.value, InstanceState.DRAINED.value)


def move_instances(
    session: Session,
    instance_ids: Iterable[str],
    after: InstanceState,
    reason: str,
    actor: str,
    now: datetime,
) -> list[InstanceRow]:
    """Move each instance to `after` where the state machine allows it (an instance not
    recorded yet starts there); returns the rows moved, for the caller to add to. The caller
    commits."""
    moved = []
    for instance_id in dict.fromkeys(instance_ids):
        row = session.get(InstanceRow, instance_id)
        before = InstanceState(row.state) if row is not None else None
        if before is after or not may_move(before, after):
            continue
        if row is None:
            row = InstanceRow(instance_id=instance_id, state=after.value, reason="", since=now)
        row.state, row.reason, row.since = after.value, reason[:500], now
        session.add(row)
        session.add(
            InstanceChangeRow(
                instance_id=instance_id,
                at=now,
                from_state=before.value if before else None,
                to_state=after.value,
                actor=actor,
                reason=reason[:500],
            )
        )
        moved.append(row)
    return moved


def status_of(row: InstanceRow) -> InstanceStatus:
    return InstanceStatus(row.instance_id, InstanceState(row.state), row.reason, utc(row.since))


class InstanceRecordBook(StoreBase):
    def __init__(
        self, engine: Engine, clock: Clock, specs: dict[str, JobSpec] | None = None
    ) -> None:
        super().__init__(engine, clock, specs)
        self._kinds = InstanceKindBook(engine, clock, specs)  # the types it vets hellos by

    def move_instances(
        self, instance_ids: Sequence[str], after: InstanceState, reason: str, actor: str
    ) -> list[str]:
        """Returns the instances moved (the others were there already, or past it)."""
        if not instance_ids:
            return []
        with self._session() as session:
            moved = move_instances(session, instance_ids, after, reason, actor, self._clock.now())
            session.commit()
            return [row.instance_id for row in moved]

    def instance_statuses(
        self, states: Iterable[InstanceState] | None = None
    ) -> dict[str, InstanceStatus]:
        query = select(InstanceRow)
        if states is not None:
            query = query.where(col(InstanceRow.state).in_([s.value for s in states]))
        with self._session() as session:
            return {row.instance_id: status_of(row) for row in session.exec(query).all()}

    def instance_history(self, instance_id: str) -> list[InstanceChange]:
        with self._session() as session:
            rows = session.exec(
                select(InstanceChangeRow)
                .where(col(InstanceChangeRow.instance_id) == instance_id)
                .order_by(col(InstanceChangeRow.id))
            ).all()
        return [
            InstanceChange(
                r.instance_id,
                utc(r.at),
                InstanceState(r.from_state) if r.from_state else None,
                InstanceState(r.to_state),
                r.actor,
                r.reason,
            )
            for r in rows
        ]

    # -- drains: how the autoscaler and the control plane agree an instance is empty before
    # it is terminated, so that no job is assigned to a machine on its way out.

    def ask_to_drain(
        self,
        instance_ids: Sequence[str],
        reason: str,
        kind: DrainKind = DrainKind.SCALE_IN,
        actor: str = "autoscaler",
    ) -> None:
        """Idempotent: an instance asked twice keeps its first request."""
        if not instance_ids:
            return
        now = self._clock.now()
        with self._session() as session:
            for row in move_instances(
                session, instance_ids, InstanceState.DRAINING, reason, actor, now
            ):
                row.drain_kind, row.drain_reason, row.drain_asked_at = kind.value, reason, now
            # The cost ledger counts an instance's empty time from here on as draining.
            session.exec(
                update(InstanceLifeRow)
                .where(col(InstanceLifeRow.instance_id).in_(list(instance_ids)))
                .where(col(InstanceLifeRow.draining_at).is_(None))
                .values(draining_at=now)
            )
            session.commit()

    def drain_requests(self) -> dict[str, DrainRequest]:
        """The instances being drained or drained, not yet terminating or gone."""
        with self._session() as session:
            rows = session.exec(select(InstanceRow).where(col(InstanceRow.state).in_(_DRAINS)))
            return {
                r.instance_id: DrainRequest(
                    r.instance_id,
                    r.drain_reason or r.reason,
                    utc(r.drain_asked_at or r.since),
                    utc(r.drained_at) if r.drained_at else None,
                    DrainKind(r.drain_kind or DrainKind.SCALE_IN.value),
                )
                for r in rows.all()
            }

    def mark_drained(self, instance_ids: Sequence[str]) -> None:
        if not instance_ids:
            return
        now = self._clock.now()
        with self._session() as session:
            why = "nothing runs there any more"
            for row in move_instances(
                session, instance_ids, InstanceState.DRAINED, why, "control-plane", now
            ):
                row.drained_at = now
            session.commit()

    # -- what the control plane records of instances gone, and checks hellos against ---------

    def record_gone(self, instance_id: str, reason: str, ended: bool = False) -> None:
        """A spot warning (the instance is warned: its GPUs are no capacity, its hello is
        refused), or with `ended` EC2's word that it stopped running, which the cost ledger
        takes as the end of its bill unless an earlier end is known. The instance's one record
        keeps the first end reported."""
        now = self._clock.now()
        after = InstanceState.TERMINATED if ended else InstanceState.WARNED
        with self._session() as session:
            try:
                move_instances(session, [instance_id], after, reason, "control-plane", now)
                if ended:
                    end_instance_life(session, instance_id, now, reason)
                session.commit()
            except IntegrityError:
                pass  # another replica recorded it first

    def gone_since(self, since: datetime) -> list[str]:
        """The instances warned or gone since `since`, whose hellos are refused."""
        with self._session() as session:
            query = select(InstanceRow.instance_id).where(
                col(InstanceRow.since) >= since,
                col(InstanceRow.state).in_([s.value for s in NOT_WELCOME]),
            )
            return list(session.exec(query))

    def launched_as(self, instance_id: str) -> tuple[str, Market] | None:
        """Its type and market as EC2 listed them, or None if the autoscaler has not seen it."""
        with self._session() as session:
            row = session.get(InstanceLifeRow, instance_id)
        if row is None:
            return None
        return row.instance_type, Market(row.market)

    def listed_among(self, instance_ids: Sequence[str]) -> set[str]:
        """Those of `instance_ids` the autoscaler has seen in EC2's list (one query)."""
        if not instance_ids:
            return set()
        with self._session() as session:
            found = session.exec(
                select(InstanceLifeRow.instance_id).where(
                    col(InstanceLifeRow.instance_id).in_(list(instance_ids))
                )
            ).all()
        return set(found)

    def described_kinds(self) -> list[InstanceKind]:
        """The GPU types EC2 described to the autoscaler (`instance_kinds.py`)."""
        return self._kinds.kinds()

    def lower_memory(self, kind: InstanceKind, reported_gib: float) -> None:
        """A worker of the type reported less memory per GPU (`instance_kinds.py`)."""
        self._kinds.lower_memory(kind, reported_gib)
