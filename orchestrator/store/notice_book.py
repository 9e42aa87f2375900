"""The outbox of completion notices: the relay turns job history lines into notice rows and
moves its cursor past them in one transaction (a replica that dies between the two leaves
neither); the sender takes the rows due, and marks each delivered, or due again later, or
dead after its last try. Rows are kept: they are the delivery record."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from kernel.job_record import JobEvent
from kernel.job_spec import JobSpec
from orchestrator.store.base import StoreBase, job_event, utc
from orchestrator.store.tables import JobEventRow, NoticeCursorRow, NoticeRow

CURSOR = "notices"
PENDING, DELIVERED, DEAD = "pending", "delivered", "dead"


@dataclass(frozen=True)
class NoticeDraft:
    notice_id: str
    target: str  # webhook | eventbridge
    job_id: str
    kind: str
    body: str
    url: str | None = None


@dataclass(frozen=True)
class StoredNotice:
    id: int
    notice_id: str
    target: str
    job_id: str
    kind: str
    body: str
    url: str | None
    state: str
    attempts: int
    next_at: datetime
    last_error: str | None
    delivered_at: datetime | None


# (history line id, the line, the job's spec) -> the notices it makes
Drafter = Callable[[int, JobEvent, JobSpec], Sequence[NoticeDraft]]


class NoticeBook(StoreBase):
    def relay(self, draft: Drafter, settled_before: datetime, limit: int = 500) -> int:
        """Make the notices of the history lines after the cursor (written before
        `settled_before`: a line whose transaction commits late is not skipped), and move
        the cursor past them. The first relay starts at the newest line: notices begin when
        the feature does. Returns how many lines it read."""
        with self._session() as session:
            cursor = session.get(NoticeCursorRow, CURSOR)
            if cursor is None:
                newest = session.exec(select(JobEventRow.id).order_by(col(JobEventRow.id).desc()))
                session.add(NoticeCursorRow(name=CURSOR, last_event_id=newest.first() or 0))
                with contextlib.suppress(IntegrityError):  # another replica started it first
                    session.commit()
                return 0
            rows = session.exec(
                select(JobEventRow)
                .where(col(JobEventRow.id) > cursor.last_event_id)
                .where(col(JobEventRow.at) < settled_before)
                .order_by(col(JobEventRow.id))
                .limit(limit)
            ).all()
            if not rows:
                return 0
            specs = self._records(session, sorted({row.job_id for row in rows}))
            now = self._clock.now()
            for row in rows:
                event = job_event(row)
                for notice in draft(row.id or 0, event, specs[row.job_id].spec):
                    session.add(_row(notice, now))
            moved = session.exec(
                update(NoticeCursorRow)
                .where(col(NoticeCursorRow.name) == CURSOR)
                .where(col(NoticeCursorRow.last_event_id) == cursor.last_event_id)
                .values(last_event_id=rows[-1].id)
            )
            if moved.rowcount != 1:
                session.rollback()  # another relay moved it first: its rows stand
                return 0
            try:
                session.commit()
            except IntegrityError:
                return 0  # the same notices, made by another relay meanwhile
        return len(rows)

    def due(self, now: datetime, limit: int = 50) -> list[StoredNotice]:
        with self._session() as session:
            rows = session.exec(
                select(NoticeRow)
                .where(col(NoticeRow.state) == PENDING)
                .where(col(NoticeRow.next_at) <= now)
                .order_by(col(NoticeRow.next_at), col(NoticeRow.id))
                .limit(limit)
            ).all()
        return [_stored(row) for row in rows]

    def delivered(self, row_id: int) -> None:
        self._set(row_id, state=DELIVERED, delivered_at=self._clock.now(), last_error=None)

    def failed(self, row_id: int, attempts: int, error: str, next_at: datetime | None) -> None:
        """A try failed: due again at `next_at`, or dead (None: that was the last try)."""
        state = PENDING if next_at is not None else DEAD
        self._set(
            row_id,
            state=state,
            attempts=attempts,
            last_error=error[:2000],
            next_at=next_at or self._clock.now(),
        )

    def redeliver(self, row_id: int) -> bool:
        """A dead notice tried again from its first try (an operator's ask)."""
        with self._session() as session:
            changed = session.exec(
                update(NoticeRow)
                .where(col(NoticeRow.id) == row_id, col(NoticeRow.state) == DEAD)
                .values(state=PENDING, attempts=0, next_at=self._clock.now())
            )
            session.commit()
        return bool(changed.rowcount)

    def notices(
        self, state: str | None = None, job_id: str | None = None, limit: int = 200
    ) -> list[StoredNotice]:
        query = select(NoticeRow).order_by(col(NoticeRow.id).desc()).limit(limit)
        if state is not None:
            query = query.where(col(NoticeRow.state) == state)
        if job_id is not None:
            query = query.where(col(NoticeRow.job_id) == job_id)
        with self._session() as session:
            return [_stored(row) for row in session.exec(query).all()]

    def _set(self, row_id: int, **values: object) -> None:
        with self._session() as session:
            session.exec(update(NoticeRow).where(col(NoticeRow.id) == row_id).values(**values))
            session.commit()


def _row(notice: NoticeDraft, now: datetime) -> NoticeRow:
    return NoticeRow(
        notice_id=notice.notice_id,
        target=notice.target,
        job_id=notice.job_id,
        kind=notice.kind,
        body=notice.body,
        url=notice.url,
        state=PENDING,
        attempts=0,
        next_at=now,
        created_at=now,
    )


def _stored(row: NoticeRow) -> StoredNotice:
    return StoredNotice(
        row.id or 0,
        row.notice_id,
        row.target,
        row.job_id,
        row.kind,
        row.body,
        row.url,
        row.state,
        row.attempts,
        utc(row.next_at),
        row.last_error,
        utc(row.delivered_at) if row.delivered_at else None,
    )
