"""The demo's closing tables: its timeline, and each resumed job's video against an
uninterrupted render of the same spec."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from rich.table import Table

from framefleet.demo_outputs import ResumeCheck
from framefleet.demo_report import seconds_since, timeline_rows
from kernel.job_record import JobEvent


def resume_table(checks: Sequence[ResumeCheck]) -> Table:
    table = Table(title="resumed jobs against an uninterrupted render of the same spec")
    for column in ("job", "MP4 sha256 (resumed)", "uninterrupted", "identical"):
        table.add_column(column)
    for check in checks:
        same = "[green]yes, bit for bit[/]" if check.identical else "[red]NO[/]"
        reference = (check.reference_sha256 or "failed")[:16]
        table.add_row(check.job_id, check.resumed_sha256[:16], reference, same)
    return table


def timeline_table(
    timeline: list[dict[str, Any]], histories: dict[str, list[JobEvent]], started: datetime
) -> Table:
    table = Table(title="timeline")
    for column in ("at", "what", "instance / job", "detail"):
        table.add_column(column, overflow="fold")
    for row in timeline_rows(timeline, histories):
        table.add_row(seconds_since(started, row.at), row.what, row.subject, row.detail)
    return table
