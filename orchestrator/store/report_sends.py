"""Which finance reports were sent: a period is sent once (a replica that finds it claimed
leaves it), and a failed send stays on record, with its error, until a retry succeeds."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.exc import IntegrityError

from orchestrator.store.base import StoreBase, utc
from orchestrator.store.tables import ReportSendRow

# A claim older than this belongs to a sender that died mid-send: it may be taken over.
STALE_CLAIM = timedelta(minutes=10)


class ReportSendBook(StoreBase):
    def claim_report(self, period: str, since: datetime, force: bool = False) -> bool:
        """True if this caller should send the report now (nobody sent or is sending it)."""
        now = self._clock.now()
        try:
            with self._session() as session:
                row = session.get(ReportSendRow, (period, since))
                if row is None:
                    row = ReportSendRow(
                        period=period, period_start=since, state="sending", tries=0, updated_at=now
                    )
                elif (row.state == "sent" and not force) or (
                    row.state == "sending" and now - utc(row.updated_at) < STALE_CLAIM
                ):
                    return False
                row.state, row.updated_at, row.tries = "sending", now, row.tries + 1
                session.add(row)
                session.commit()
                return True
        except IntegrityError:
            return False  # another replica claimed it first

    def report_sent(self, period: str, since: datetime, message_id: str) -> None:
        self._finish(period, since, "sent", None, message_id)

    def report_failed(self, period: str, since: datetime, error: str) -> None:
        self._finish(period, since, "failed", error[:2000], None)

    def report_state(self, period: str, since: datetime) -> tuple[str, int, str | None] | None:
        """(state, tries, last error) of a period's report, if it was ever claimed."""
        with self._session() as session:
            row = session.get(ReportSendRow, (period, since))
            return None if row is None else (row.state, row.tries, row.last_error)

    def _finish(
        self, period: str, since: datetime, state: str, error: str | None, message_id: str | None
    ) -> None:
        with self._session() as session:
            row = session.get(ReportSendRow, (period, since))
            if row is None:
                return
            row.state, row.updated_at = state, self._clock.now()
            row.last_error, row.message_id = error, message_id or row.message_id
            session.add(row)
            session.commit()


def _taken(row: ReportSendRow, now: datetime, force: bool) -> bool:
    if row.state == "sent":
        return not force
    return row.state == "sending" and now - utc(row.updated_at) < STALE_CLAIM
