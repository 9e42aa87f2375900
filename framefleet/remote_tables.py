"""How the CLI shows the API's answers: as a table on a terminal (every value from outside
escaped, rich reading no markup in it), or as the API's JSON (`-o json`) for scripts."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kernel.outside_text import printable

CELL = 200  # characters of one value in a table; -o json gives them whole


def with_output(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """A read's `-o json`: the API's answer as it is, for scripts."""
    parser.add_argument(
        "-o", "--output", choices=["table", "json"], help="table (the default) or the API's JSON"
    )
    return parser


def outside(text: str, limit: int, keep_newlines: bool = False) -> Text:
    """Text from producers or workers as plain text: rich reads no markup in it (no colours,
    no links), and control characters are escaped."""
    if keep_newlines:
        return Text("\n".join(printable(line, limit) for line in text.splitlines()))
    return Text(printable(text, limit))


def cell(value: Any) -> Text:
    if value is None:
        return Text("-")
    if isinstance(value, list | tuple):
        return Text(printable(", ".join(str(v) for v in value), CELL))
    if isinstance(value, dict):
        return Text(printable(json.dumps(value, sort_keys=True), CELL))
    return Text(printable(str(value), CELL))


def rows_table(title: str, rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> Table:
    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(cell(row.get(column)) for column in columns))
    return table


def fields_table(title: str, answer: Mapping[str, Any], skip: Sequence[str] = ()) -> Table:
    table = Table(title=title, show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for name, value in answer.items():
        if name not in skip:
            table.add_row(name, cell(value))
    return table


def show(
    console: Console,
    output: str | None,
    answer: Any,
    table: Table | Sequence[Table],
) -> None:
    """The answer as JSON (`output` json) or as the table(s) made of it."""
    if output == "json":
        sys.stdout.write(json.dumps(answer, indent=2, sort_keys=True) + "\n")
        return
    for one in [table] if isinstance(table, Table) else table:
        console.print(one)
