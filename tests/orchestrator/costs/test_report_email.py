"""The finance email, sent through SES (moto over HTTP) and read back from SES's own record:
its HTML, its CSV, the FOCUS export and the ledger agree to the cent; it states its period and
time zone; a period is sent once; a failed send is recorded and retried."""

from __future__ import annotations

import csv
import email
import io
import re
import uuid
from collections import defaultdict
from collections.abc import Sequence
from decimal import Decimal
from email.message import Message
from pathlib import Path

import boto3
import pytest
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.ses.models import ses_backends

from kernel.clock import FakeClock
from orchestrator.aws.ses import SesSender
from orchestrator.costs.focus import focus_rows
from orchestrator.costs.ledger import CostLedger
from orchestrator.costs.money import cents
from orchestrator.costs.periods import Period
from orchestrator.costs.reporting import Reporter, ReportNotSent, ReportSettings
from orchestrator.store.job_store import JobStore
from tests.support.fleet_history import FleetHistory, a_day_of_work
from tests.support.local_services import REGION

SENDER = "costs@framefleet.example"


def sent_to(recipient: str) -> list[Message]:
    backend = ses_backends[DEFAULT_ACCOUNT_ID][REGION]
    return [
        email.message_from_bytes(m.raw_data.encode() if isinstance(m.raw_data, str) else m.raw_data)
        for m in backend.sent_messages
        if recipient in getattr(m, "destinations", []) or recipient in str(m.raw_data)
    ]


def a_reported_day(
    store: JobStore, clock: FakeClock, moto_endpoint: str, tmp_path: Path
) -> tuple[Reporter, Period, str]:
    """A day of work, and a reporter that emails it to a recipient of this test's own."""
    day, end = a_day_of_work(FleetHistory(store, clock))
    recipient = f"finance-{uuid.uuid4().hex[:8]}@framefleet.example"
    ses = boto3.client("ses", region_name=REGION, endpoint_url=moto_endpoint)
    ses.verify_email_identity(EmailAddress=SENDER)
    settings = ReportSettings((recipient,), SENDER, tmp_path / "reports")
    reports = Reporter(
        CostLedger(store.cost_facts, clock), store.report_sends, SesSender(ses), settings, clock
    )
    return reports, Period("day", day, end), recipient


def payload(message: Message) -> str:
    data = message.get_payload(decode=True)
    assert isinstance(data, bytes)
    return data.decode()


def part(message: Message, content_type: str) -> list[Message]:
    return [p for p in message.walk() if p.get_content_type() == content_type]


def test_the_email_the_csv_the_focus_export_and_the_ledger_agree_to_the_cent(
    store: JobStore, clock: FakeClock, moto_endpoint: str, tmp_path: Path
) -> None:
    reports, period, recipient = a_reported_day(store, clock, moto_endpoint, tmp_path)
    day, end = period.since, period.until
    message_id = reports.send(period)
    assert message_id
    (message,) = sent_to(recipient)
    assert f"day {day:%Y-%m-%d}" in message["Subject"]
    assert "(UTC)" in message["Subject"]
    (html_part,) = part(message, "text/html")
    html = payload(html_part)
    assert "all times UTC" in html
    shown = re.search(r"id='total'>\$([\d,.]+)<", html)
    assert shown is not None
    html_total = Decimal(shown.group(1).replace(",", ""))
    # The email's CSV is the period's line items, as FOCUS rows; the summary's sections are
    # kept as costs.csv beside the report's HTML.
    (csv_part,) = [p for p in part(message, "text/csv")]
    assert csv_part.get_filename() == f"framefleet-costs-day-{day:%Y-%m-%d}-focus.csv"
    attached = list(csv.DictReader(io.StringIO(payload(csv_part))))
    attached_total = cents(sum((Decimal(r["BilledCost"]) for r in attached), Decimal(0)))
    kept = tmp_path / "reports" / f"day-{day:%Y-%m-%d}" / "costs.csv"
    rows = list(csv.DictReader(io.StringIO(kept.read_text())))
    csv_total = Decimal(next(r["usd"] for r in rows if r["section"] == "total"))
    categories = [Decimal(r["usd"]) for r in rows if r["section"] == "category"]
    ledger = CostLedger(store.cost_facts, clock)
    priced = ledger.period(day, end)
    s3 = ledger.s3_usd(priced.attempts)
    focus = list(focus_rows(priced, s3, "acct"))
    focus_total = cents(sum((Decimal(r["BilledCost"]) for r in focus), Decimal(0)))
    ledger_total = cents(priced.total + sum(s3.values(), Decimal(0)))
    assert ledger_total > Decimal("5")
    assert html_total == csv_total == focus_total == ledger_total == sum(categories)
    assert attached_total == ledger_total
    # Cents are allocated once, at the line items: each table is a sum of the attached
    # items' cents, to the cent, and the tables agree with each other.
    cents_by_category: dict[str, Decimal] = defaultdict(Decimal)
    cents_by_job: dict[str, Decimal] = defaultdict(Decimal)
    for item in attached:
        billed = Decimal(item["x_FrameFleetBilledCents"])
        requests = item["ServiceName"] == "Amazon Simple Storage Service"
        cents_by_category["S3 requests" if requests else item["x_FrameFleetCategory"]] += billed
        if item["x_FrameFleetJobId"]:
            cents_by_job[item["x_FrameFleetJobId"]] += billed
    assert sum(cents_by_category.values()) == ledger_total
    category_rows = {r["item"]: Decimal(r["usd"]) for r in rows if r["section"] == "category"}
    assert {name: usd for name, usd in category_rows.items() if usd} == {
        name: usd for name, usd in cents_by_category.items() if usd
    }
    assert {r["item"]: Decimal(r["usd"]) for r in rows if r["section"] == "job"} == dict(
        cents_by_job
    )
    for section in ("market_day", "family", "pool", "tag:team"):
        assert sum(Decimal(r["usd"]) for r in rows if r["section"] == section) == ledger_total
    # Where the money went: the interrupted job's lost work is there, and the idle tails.
    names = {r["item"] for r in rows if r["section"] == "category"}
    assert {"work", "startup", "checkpoint", "lost", "idle", "draining"} <= names
    # Outside text is made harmless: a tag that looks like a formula stays text.
    assert any(r["item"] == "'=1+2" for r in rows if r["section"] == "tag:project")
    # By model, in finance's terms: a video's cost and a GPU-hour's, and they add up.
    by_model = {r["item"]: r for r in rows if r["section"] == "model"}
    assert by_model
    for row in by_model.values():
        videos = int(row["detail"].split(" videos")[0])
        if videos:
            per_video = Decimal(row["detail"].split(";")[1].removesuffix("/video"))
            assert abs(per_video * videos - Decimal(row["usd"])) <= Decimal("0.01") * videos
        assert "GPU-hours" in row["detail"]
    assert "id='by-model'" in html
    assert "Per video" in html
    pngs = [p.get_filename() for p in part(message, "image/png")]
    assert "spend-by-day.png" in pngs
    assert "where-the-money-went.png" in pngs
    assert (tmp_path / "reports" / f"day-{day:%Y-%m-%d}" / "report.html").is_file()


def test_a_period_is_sent_once_unless_forced(
    store: JobStore, clock: FakeClock, moto_endpoint: str, tmp_path: Path
) -> None:
    reports, period, recipient = a_reported_day(store, clock, moto_endpoint, tmp_path)
    assert reports.send(period) is not None
    assert reports.send(period) is None
    assert len(sent_to(recipient)) == 1
    assert reports.send(period, force=True) is not None
    assert len(sent_to(recipient)) == 2
    assert store.report_sends.report_state("day", period.since) == ("sent", 2, None)


class FailingOnce:
    def __init__(self, then: SesSender) -> None:
        self.then, self.failed = then, False

    def send_raw(self, raw: bytes, sender: str, recipients: Sequence[str]) -> str:
        if not self.failed:
            self.failed = True
            raise ConnectionError("SES endpoint unreachable")
        return self.then.send_raw(raw, sender, recipients)


def test_a_failed_send_is_recorded_and_the_schedule_sends_it_later(
    store: JobStore, clock: FakeClock, moto_endpoint: str, tmp_path: Path
) -> None:
    reports, period, recipient = a_reported_day(store, clock, moto_endpoint, tmp_path)
    day = period.since
    assert isinstance(reports.sender, SesSender)
    reports.sender = FailingOnce(reports.sender)
    (due,) = [p for p in reports.due(clock.now()) if p.kind == "day"]
    assert due.since == day
    with pytest.raises(ReportNotSent, match="unreachable"):
        reports.send(due)
    state = store.report_sends.report_state("day", day)
    assert state is not None
    assert state[0] == "failed"
    assert "unreachable" in (state[2] or "")
    assert sent_to(recipient) == []
    assert reports.send(due) is not None  # the next round of the schedule
    assert len(sent_to(recipient)) == 1
