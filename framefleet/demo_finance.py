"""The demo's finance email: the product's own ledger and report over the store, on the same
wall clock the console, the API and `framefleet costs export` read, so a demo keeps one set of
books. The market's prices are the replayed trace's; the hours are the ones the demo's
instances ran. The email goes through SES (moto) and is kept as an .eml file."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import boto3

from kernel.clock import FakeClock
from orchestrator.aws.ses import SesSender
from orchestrator.costs.ledger import CostLedger, CostSettings
from orchestrator.costs.mail import report_email
from orchestrator.costs.periods import Period
from orchestrator.costs.report import Report
from orchestrator.costs.reporting import Reporter, ReportSettings
from orchestrator.store.job_store import JobStore

SENDER = "costs@framefleet.demo"
FINANCE = "finance@framefleet.demo"


def finance_report(
    store: JobStore,
    costs: CostSettings,
    started: datetime,
    ended: datetime,
    endpoint: str,
    region: str,
    folder: Path,
) -> tuple[Report, Path]:
    """Builds, keeps and emails the report of the demo's run, from `started` to `ended`;
    returns it and the .eml file."""
    end = FakeClock(ended)  # live instances are billed up to the end
    ledger = CostLedger(store.cost_facts, end, costs)
    settings = ReportSettings((FINANCE,), SENDER, folder)
    reporter = Reporter(ledger, store.report_sends, None, settings, end)
    report = reporter.build(Period("custom", started, ended))
    reporter.write(report)
    message = report_email(report, SENDER, [FINANCE])
    raw = message.as_bytes()
    ses = boto3.client("ses", region_name=region, endpoint_url=endpoint)
    ses.verify_email_identity(EmailAddress=SENDER)
    SesSender(ses).send_raw(raw, SENDER, [FINANCE])
    eml = folder / "finance-report.eml"
    eml.write_bytes(raw)
    return report, eml
