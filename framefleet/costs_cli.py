"""`framefleet costs export` (the ledger as FOCUS rows), `framefleet report` (a period's
finance report: files, and the email), and each job's cost for `framefleet job ID`."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from framefleet.control_plane import reporter
from framefleet.remote_tables import with_output
from framefleet.settings import Settings
from kernel.clock import Clock
from kernel.errors import ConfigurationError
from orchestrator.costs.focus import focus_export, write_csv, write_parquet
from orchestrator.costs.job_cost import job_cost
from orchestrator.costs.ledger import CostLedger
from orchestrator.costs.money import ZERO, apportion, usd
from orchestrator.costs.periods import Period, PeriodKind, last_complete, period_containing
from orchestrator.store.job_store import JobStore


def add_commands(commands: Any) -> None:
    costs = commands.add_parser("costs", help="the cost ledger")
    actions = costs.add_subparsers(dest="action", required=True)
    export = actions.add_parser("export", help="write the ledger as FinOps FOCUS 1.0 rows")
    export.add_argument("--format", choices=["focus"], default="focus")
    export.add_argument("--since", type=utc_moment, help="UTC (default: 30 days ago)")
    export.add_argument("--until", type=utc_moment, help="UTC (default: now)")
    export.add_argument("--output", type=Path, required=True, help=".csv or .parquet")
    report = with_output(
        commands.add_parser("report", help="a period's finance report, emailed by SES")
    )
    report.add_argument("--period", choices=["day", "week", "month"], default="day")
    report.add_argument("--since", type=utc_moment, help="UTC; default: the last complete period")
    report.add_argument("--until", type=utc_moment, help="UTC; with --since, a period of your own")
    report.add_argument("--force", action="store_true", help="send even if sent before")
    report.add_argument("--no-email", action="store_true", help="write the files only")
    report.add_argument(
        "--by",
        choices=["team", "project", "customer", "model", "pool", "market", "day"],
        help="through the API: the period's spend by this grouping (the console's Money page)",
    )


def run_command(
    args: argparse.Namespace, settings: Settings, store: JobStore, clock: Clock, console: Console
) -> None:
    if args.command == "costs":
        _export(args, settings, store, clock, console)
        return
    period = _period(args, clock)
    reports = reporter(settings, store, clock, email=not args.no_email)
    built = reports.build(period)
    html = reports.write(built)
    console.print(f"{built.subject()}: {html}")
    if not args.no_email:
        message_id = reports.send(period, force=args.force)
        console.print(
            f"emailed to {', '.join(settings.costs.finance_recipients)} ({message_id})"
            if message_id
            else "not emailed: this period's report was sent before (--force sends it again)"
        )


def job_costs(store: JobStore, clock: Clock, settings: Settings, job_id: str) -> Table | None:
    """What the job cost, by category (waste included), across all its attempts."""
    ledger = CostLedger(store.cost_facts, clock, settings.costs.ledger())
    parts = job_cost(store.cost_facts, ledger, job_id, clock.now())
    if parts is None:
        return None
    table = Table(title=f"cost of {job_id} (UTC; waste: lost, idle, draining)")
    table.add_column("category")
    table.add_column("USD", justify="right")
    shown = apportion(parts.by_category)
    for name, amount in shown.items():
        table.add_row(name, usd(amount))
    table.add_row("total", usd(sum(shown.values(), ZERO)), style="bold")
    return table


def _export(
    args: argparse.Namespace, settings: Settings, store: JobStore, clock: Clock, console: Console
) -> None:
    now = clock.now()
    since, until = args.since or now - timedelta(days=30), args.until or now
    ledger = CostLedger(store.cost_facts, clock, settings.costs.ledger())
    export = focus_export(ledger, since, until, settings.costs.billing_account_id)
    suffix = args.output.suffix.lower()
    if suffix == ".parquet":
        try:
            write_parquet(export.rows, args.output)
        except ImportError:
            raise ConfigurationError(
                "Parquet needs pyarrow: pip install 'framefleet[parquet]'"
            ) from None
    elif suffix == ".csv":
        write_csv(export.rows, args.output)
    else:
        raise ConfigurationError(f"--output must end in .csv or .parquet, not {suffix!r}")
    console.print(f"{len(export.rows)} FOCUS 1.0 rows, {usd(export.total)}, to {args.output}")
    for note in export.incomplete:
        console.print(f"incomplete: {note}", markup=False, highlight=False)


def _period(args: argparse.Namespace, clock: Clock) -> Period:
    kind: PeriodKind = args.period
    if args.since is not None and args.until is not None:
        return Period("custom", args.since, args.until)
    if args.since is not None:
        return period_containing(kind, args.since)
    return last_complete(kind, clock.now())


def utc_moment(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO date or time: {text!r}") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
