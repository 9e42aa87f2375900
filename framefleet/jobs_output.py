"""`framefleet jobs`: a table for a person at a terminal; whole values for a script. Rich's
table folds or cuts a long job id to the terminal's width, so a pipe (`framefleet jobs | cut`,
`xargs framefleet cancel`) gets tab-separated columns instead, or JSON lines with
`--output json`. Job ids and tags are producers' text: printed through `printable`."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kernel.job_record import JobRecord
from kernel.outside_text import printable

COLUMNS = ("job_id", "state", "attempt", "priority", "model", "size", "deadline", "team")


class JobsOutput(StrEnum):
    TABLE = "table"
    PLAIN = "plain"
    JSON = "json"


def row(record: JobRecord) -> dict[str, Any]:
    spec = record.spec
    return {
        "job_id": record.job_id,
        "state": record.state.value,
        "attempt": record.attempt,
        "priority": record.priority,
        "model": spec.model,
        "size": f"{spec.width}x{spec.height}x{spec.num_frames}",
        "deadline": record.deadline.isoformat() if record.deadline else None,
        "team": spec.tags.team,
    }


def jobs_table(records: Sequence[JobRecord]) -> Table:
    table = Table(title=f"jobs ({len(records)})")
    for column in COLUMNS:
        table.add_column(column)
    for record in records:
        values = row(record)
        deadline = record.deadline.strftime("%Y-%m-%d %H:%M UTC") if record.deadline else "-"
        cells = [str(values[c]) for c in COLUMNS[:6]] + [deadline, values["team"] or "-"]
        table.add_row(*(Text(printable(cell)) for cell in cells))  # Text: no markup from outside
    return table


def print_jobs(
    records: Sequence[JobRecord],
    output: JobsOutput | None,
    console: Console,
    stream: TextIO | None = None,
) -> None:
    """`output` None: a table on a terminal, plain columns otherwise."""
    stream = stream or sys.stdout
    if output is None:
        output = JobsOutput.TABLE if stream.isatty() else JobsOutput.PLAIN
    if output is JobsOutput.TABLE:
        console.print(jobs_table(records))
    elif output is JobsOutput.JSON:
        for record in records:
            stream.write(json.dumps(row(record)) + "\n")
    else:
        stream.write("\t".join(COLUMNS) + "\n")
        for record in records:
            values = row(record)
            cells = ("-" if values[c] is None else printable(str(values[c])) for c in COLUMNS)
            stream.write("\t".join(cells) + "\n")
