"""What the console's history page reads: every job's state moves up to a moment, and the
deadlines that fell in a range with how their jobs ended. A collaborator of its own over the
same engine, not one more book of the job store."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, Row, Select, Table
from sqlalchemy import select as select_columns
from sqlalchemy.exc import OperationalError
from sqlmodel import Session

from kernel.errors import StoreUnavailable
from kernel.job_state import JobState
from orchestrator.store.base import JOBS, table_of, utc
from orchestrator.store.tables import JobEventRow

EVENTS: Table = table_of(JobEventRow)
MAX_MOVES = 200_000  # a history page reads at most this many state moves


@dataclass(frozen=True)
class StateMove:
    job_id: str
    at: datetime
    to_state: JobState


@dataclass(frozen=True)
class DeadlineOutcome:
    job_id: str
    deadline: datetime
    state: JobState
    finished_at: datetime | None  # when it reached its terminal state


class HistoryFacts:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def _rows(self, query: Select[Any]) -> list[Row[Any]]:
        try:
            with Session(self._engine) as session:
                return list(session.execute(query))
        except OperationalError as error:
            raise StoreUnavailable(f"database error: {error.orig}") from error

    def state_moves_until(self, until: datetime, limit: int = MAX_MOVES) -> list[StateMove]:
        """Every job's moves before `until`, oldest first (the newest `limit` if more)."""
        query = (
            select_columns(EVENTS.c.job_id, EVENTS.c.at, EVENTS.c.to_state)
            .where(EVENTS.c.at < until)
            .order_by(EVENTS.c.id.desc())
            .limit(limit)
        )
        moves = [StateMove(r.job_id, utc(r.at), JobState(r.to_state)) for r in self._rows(query)]
        return sorted(moves, key=lambda move: move.at)

    def deadline_outcomes(self, since: datetime, until: datetime) -> list[DeadlineOutcome]:
        """Jobs whose deadline falls in [since, until), and when each finished."""
        query = select_columns(
            JOBS.c.job_id, JOBS.c.deadline, JOBS.c.state, JOBS.c.updated_at
        ).where((JOBS.c.deadline >= since) & (JOBS.c.deadline < until))
        outcomes = []
        for row in self._rows(query):
            state = JobState(row.state)
            finished = utc(row.updated_at) if state.terminal else None
            outcomes.append(DeadlineOutcome(row.job_id, utc(row.deadline), state, finished))
        return outcomes
