"""Why a queued job waits, as its page shows it: the scheduler's reason (no GPU fits, a quota,
a reservation elsewhere) and the autoscaler's (why it bought nothing for the job). Columns of
the job's row, but not moves of the job: no version, no history."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import Column, update

from orchestrator.store.base import JOBS, StoreBase
from orchestrator.store.leases import Fence, check_fence

# A reason longer than this is cut: it is read by people, on a page.
_MOST = 500


class WaitNoteBook(StoreBase):
    def note_waits(self, reasons: Mapping[str, str | None], fence: Fence | None = None) -> None:
        """Why each of these jobs waits for a GPU (None: it no longer waits for a reason the
        scheduler knows); only while `fence` holds, when given."""
        self._write(JOBS.c.wait_reason, reasons, fence)

    def note_capacity_waits(self, reasons: Mapping[str, str | None]) -> None:
        """Why the autoscaler bought nothing for each of these jobs (None: it did, or it no
        longer waits for capacity)."""
        self._write(JOBS.c.capacity_wait, reasons, None)

    def _write(
        self, column: Column[str], reasons: Mapping[str, str | None], fence: Fence | None
    ) -> None:
        if not reasons:
            return
        with self._session() as session:
            if fence is not None:
                check_fence(session, fence)
            for job_id, reason in reasons.items():
                session.execute(
                    update(JOBS)
                    .where(JOBS.c.job_id == job_id)
                    .values({column: reason[:_MOST] if reason else None})
                )
            session.commit()
