"""The report as one email: an HTML body with its charts inline, the CSV and the charts
attached, a plain-text part for mail readers without HTML. Building it is pure; sending goes
through the `RawEmailSender` port (SES's SendRawEmail)."""

from __future__ import annotations

from collections.abc import Sequence
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Protocol

from orchestrator.costs.money import cents
from orchestrator.costs.periods import TIME_ZONE
from orchestrator.costs.report import Report, outlook_rows, savings_line
from orchestrator.costs.report_html import render_html


class RawEmailSender(Protocol):
    def send_raw(self, raw: bytes, sender: str, recipients: Sequence[str]) -> str:
        """Returns the provider's message id."""
        ...


def report_email(report: Report, sender: str, recipients: Sequence[str]) -> EmailMessage:
    message = EmailMessage()
    message["Subject"] = report.subject()
    message["From"] = sender
    message["To"] = ", ".join(recipients)
    message["Date"] = formatdate(usegmt=True)
    message["Message-ID"] = make_msgid(domain="framefleet.local")
    summary = report.summary
    message.set_content(
        f"FrameFleet GPU costs, {report.period.label}, all times {TIME_ZONE}.\n\n"
        f"Spent: ${report.total_cents:,.2f}\n"
        f"{savings_line(summary.savings)}\n"
        f"Waste (lost work, idle, draining): ${cents(summary.waste):,.2f}\n"
        + "".join(f"{what}: {value}\n" for what, value in outlook_rows(report))
        + (
            "\nDATA INCOMPLETE:\n" + "\n".join(f"- {n}" for n in summary.incomplete) + "\n"
            if summary.incomplete
            else ""
        )
        + "\nThe HTML part has the details; the attached FOCUS CSV has every line item.\n"
    )
    ids = {name: make_msgid(domain="framefleet.local") for name in report.charts}
    message.add_alternative(
        render_html(report, lambda name: f"cid:{ids[name][1:-1]}"), subtype="html"
    )
    html_part = message.get_body(preferencelist=("html",))
    assert isinstance(html_part, EmailMessage)
    for name, png in report.charts.items():
        html_part.add_related(png, maintype="image", subtype="png", cid=ids[name], filename=name)
    stem = f"framefleet-costs-{report.period.kind}-{report.period.since:%Y-%m-%d}"
    message.add_attachment(
        report.line_items.encode(), maintype="text", subtype="csv", filename=f"{stem}-focus.csv"
    )
    for name, png in report.charts.items():
        message.add_attachment(png, maintype="image", subtype="png", filename=name)
    return message
