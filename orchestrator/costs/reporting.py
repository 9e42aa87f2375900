"""Finance reports: built from the ledger, kept as files (HTML, CSV, charts) and emailed. A
period is emailed once (`--force` sends it again); a failed send is recorded with its error
and retried by the schedule until it goes, never dropped."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Protocol

from kernel.clock import Clock, sleep_unless_stopped
from kernel.errors import FrameFleetError
from orchestrator.costs.charts import charts
from orchestrator.costs.focus import focus_csv, focus_rows
from orchestrator.costs.ledger import CostLedger
from orchestrator.costs.mail import RawEmailSender, report_email
from orchestrator.costs.outlook import outlook
from orchestrator.costs.periods import Period, PeriodKind, last_complete
from orchestrator.costs.report import Report
from orchestrator.costs.report_html import render_html
from orchestrator.costs.summary import summarize

log = logging.getLogger(__name__)


class ReportNotSent(FrameFleetError):
    pass


class ReportSends(Protocol):
    def claim_report(self, period: str, since: datetime, force: bool = ...) -> bool: ...

    def report_sent(self, period: str, since: datetime, message_id: str) -> None: ...

    def report_failed(self, period: str, since: datetime, error: str) -> None: ...


@dataclass(frozen=True)
class ReportSettings:
    recipients: tuple[str, ...] = ()
    sender: str | None = None
    out_dir: Path = Path("reports")
    scheduled: tuple[PeriodKind, ...] = ("day", "week")
    check_every: timedelta = timedelta(minutes=5)
    # How long after a period ends its report waits, so late facts (an instance's end seen
    # on the next reconcile, the last attempt's events) are in.
    settle: timedelta = timedelta(minutes=15)
    monthly_budget: Decimal | None = None  # USD; the report sets the forecast against it
    billing_account_id: str = "framefleet"  # the attached FOCUS line items'


@dataclass
class Reporter:
    ledger: CostLedger
    sends: ReportSends
    sender: RawEmailSender | None
    settings: ReportSettings
    clock: Clock
    sent: list[str] = field(default_factory=list)  # subjects, this process's

    def build(self, period: Period) -> Report:
        priced = self.ledger.period(period.since, period.until)
        s3 = self.ledger.s3_usd(priced.attempts)
        summary = summarize(priced, s3)
        now = self.clock.now()
        if period.until > now:
            summary.incomplete.insert(
                0, f"the period has not ended: the numbers run to {now:%Y-%m-%d %H:%M} UTC"
            )
        context = outlook(self._spent, period, now, self.settings.monthly_budget)
        line_items = focus_csv(list(focus_rows(priced, s3, self.settings.billing_account_id)))
        return Report(period, summary, charts(summary), context, line_items)

    def _spent(self, since: datetime, until: datetime) -> Decimal:
        priced = self.ledger.period(since, until)
        return priced.total + sum(self.ledger.s3_usd(priced.attempts).values(), Decimal(0))

    def write(self, report: Report) -> Path:
        """The report's files, in a folder of their own; returns the HTML's path."""
        folder = self.settings.out_dir / f"{report.period.kind}-{report.period.since:%Y-%m-%d}"
        folder.mkdir(parents=True, exist_ok=True)
        for name, png in report.charts.items():
            (folder / name).write_bytes(png)
        (folder / "costs.csv").write_text(report.csv(), encoding="utf-8")
        html = folder / "report.html"
        html.write_text(render_html(report, lambda name: name), encoding="utf-8")
        return html

    def send(self, period: Period, force: bool = False) -> str | None:
        """Emails the period's report unless it was sent already; returns the message id
        (None: already sent, or being sent by another replica)."""
        if self.sender is None or not self.settings.recipients or not self.settings.sender:
            raise ReportNotSent("no SES sender or no finance recipients configured")
        if not self.sends.claim_report(period.kind, period.since, force):
            log.info("the %s report was sent already (or is being sent)", period.label)
            return None
        try:
            report = self.build(period)
            self.write(report)
            message = report_email(report, self.settings.sender, self.settings.recipients)
            message_id = self.sender.send_raw(
                message.as_bytes(), self.settings.sender, self.settings.recipients
            )
        except Exception as error:
            # Recorded, then raised: the schedule retries it, a person sees it.
            self.sends.report_failed(period.kind, period.since, f"{type(error).__name__}: {error}")
            raise ReportNotSent(f"the {period.label} report was not sent: {error}") from error
        self.sends.report_sent(period.kind, period.since, message_id)
        self.sent.append(report.subject())
        log.info(
            "sent the %s report to %d recipients (%s)",
            period.label,
            len(self.settings.recipients),
            message_id,
        )
        return message_id

    def due(self, now: datetime) -> Sequence[Period]:
        """The newest complete period of each scheduled kind, once it has settled."""
        return [
            period
            for kind in self.settings.scheduled
            if now - (period := last_complete(kind, now)).until >= self.settings.settle
        ]

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            for period in self.due(self.clock.now()):
                try:
                    await asyncio.to_thread(self.send, period)
                except FrameFleetError as error:
                    log.error("%s; retrying in %s", error, self.settings.check_every)
                except Exception:
                    log.exception("the %s report failed unexpectedly; retrying", period.label)
            await sleep_unless_stopped(self.clock, stop, self.settings.check_every.total_seconds())
