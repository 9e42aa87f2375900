"""`framefleet` command line: serve, submit, jobs, job, cancel, schema, db upgrade, autoscaler,
simulate, fleet local, costs export, report, demo.

Every failure FrameFleet expects prints one line on stderr and exits 2; no tracebacks.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import boto3
from rich.console import Console
from rich.table import Table
from rich.text import Text

from autoscaler.market.trace_format import trace_json_schema
from framefleet.autoscaler_cli import add_commands as add_autoscaler_commands
from framefleet.autoscaler_cli import run_command as run_autoscaler_command
from framefleet.control_plane import build_store, control_plane
from framefleet.costs_cli import add_commands as add_costs_commands
from framefleet.costs_cli import job_costs
from framefleet.costs_cli import run_command as run_costs_command
from framefleet.fleet_cli import add_commands as add_fleet_commands
from framefleet.fleet_cli import run_command as run_fleet_command
from framefleet.heap import settle_heap
from framefleet.jobs_output import JobsOutput, print_jobs
from framefleet.settings import Settings, load_settings
from framefleet.simulate_cli import add_commands as add_simulate_commands
from framefleet.simulate_cli import run_command as run_simulate_command
from framefleet.submit_check import check_at_the_door
from framefleet.tokens_cli import add_commands as add_token_commands
from framefleet.tokens_cli import run_command as run_token_commands
from kernel.clock import SystemClock, stop_on_signals
from kernel.errors import ConfigurationError
from kernel.job_spec import job_json_schema
from kernel.job_state import ACTIVE_STATES, JobState
from kernel.outside_text import printable
from kernel.settings_support import configure_logging, exit_with
from orchestrator.aws.dead_letters import DeadLetter, peek_dead_letters
from orchestrator.aws.secrets import SecretWriter
from orchestrator.client import submit_job
from orchestrator.control.cancel import cancel_job
from orchestrator.store.job_store import JobStore

log = logging.getLogger("framefleet")


def secret_writer(settings: Settings) -> SecretWriter:
    client = boto3.client(
        "secretsmanager", region_name=settings.region, endpoint_url=settings.endpoint_url
    )
    return SecretWriter(client)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="framefleet", description=__doc__)
    parser.add_argument("--config", type=Path, help="TOML settings file (FRAMEFLEET_CONFIG)")
    commands = parser.add_subparsers(dest="command", required=True)

    commands.add_parser("serve", help="run the control plane (and the API, when api.port is set)")

    jobs = commands.add_parser("jobs", help="list jobs as a table")
    jobs.add_argument("--state", choices=[s.value for s in JobState])
    jobs.add_argument("--limit", type=int, default=200)
    jobs.add_argument(
        "--output",
        choices=[o.value for o in JobsOutput],
        help="table (on a terminal, the default), plain (tab-separated whole values, the "
        "default in a pipe) or json (one object a line)",
    )

    job = commands.add_parser("job", help="one job: spec, state, history")
    job.add_argument("job_id")

    cancel = commands.add_parser(
        "cancel", help="cancel a job (a running one stops at its next step)"
    )
    cancel.add_argument("job_id")
    cancel.add_argument("--reason", default="by the user")

    submit = commands.add_parser("submit", help="send a job to the jobs queue")
    submit.add_argument("--file", type=Path, help="job JSON file (flags override its fields)")
    for flag in ("job-id", "model", "prompt", "negative-prompt", "output", "deadline"):
        submit.add_argument(f"--{flag}")
    for flag in ("width", "height", "num-frames", "fps", "steps", "seed", "priority"):
        submit.add_argument(f"--{flag}", type=int)
    submit.add_argument("--guidance", type=float)

    commands.add_parser("dead-letters", help="show the dead-letter queue (without consuming it)")

    schema = commands.add_parser("schema", help="print or write a JSON Schema")
    schema.add_argument("--output", type=Path)
    schema.add_argument(
        "--of",
        choices=["job", "trace", "openapi"],
        default="job",
        help="the job message, one zone file of a spot trace, or the HTTP API (OpenAPI 3.1)",
    )

    db = commands.add_parser("db", help="database maintenance")
    db.add_argument("action", choices=["upgrade"])

    add_autoscaler_commands(commands)
    add_simulate_commands(commands)
    add_fleet_commands(commands)
    add_costs_commands(commands)
    add_token_commands(commands)
    demo = commands.add_parser(
        "demo", help="the whole system on this machine (make demo)", add_help=False
    )
    demo.add_argument("demo_args", nargs="*", help="see `framefleet demo --help`")
    return parser


def _job_from_args(args: argparse.Namespace) -> dict[str, Any]:
    job: dict[str, Any] = {}
    if args.file:
        try:
            job = json.loads(args.file.read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise ConfigurationError(f"cannot read job file {args.file}: {error}") from None
    job.setdefault("schema", "framefleet.job/v1")
    for name in (
        "job_id",
        "model",
        "prompt",
        "negative_prompt",
        "output",
        "deadline",
        "width",
        "height",
        "num_frames",
        "fps",
        "steps",
        "seed",
        "priority",
        "guidance",
    ):
        value = getattr(args, name)
        if value is not None:
            job[name] = value
    return job


def dead_letter_table(letters: list[DeadLetter]) -> Table:
    table = Table(title=f"dead-letter queue ({len(letters)})")
    for column in ("original message", "reason", "errors", "body"):
        table.add_column(column, overflow="fold")
    for letter in letters:
        table.add_row(
            outside(letter.original_message_id, 8),
            outside(letter.reason, 64),
            outside("\n".join(_error_lines(letter.errors)), 2000, keep_newlines=True),
            outside(letter.body, 57),
        )
    return table


def outside(text: str, limit: int, keep_newlines: bool = False) -> Text:
    """Text from producers or workers as plain text: rich reads no markup in it (no colours,
    no links), and control characters are escaped."""
    if keep_newlines:
        return Text("\n".join(printable(line, limit) for line in text.splitlines()))
    return Text(printable(text, limit))


def _error_lines(errors: str) -> list[str]:
    """The errors attribute is a JSON list we wrote, but the queue is open to anyone who may
    send to it: anything else is shown as it is."""
    try:
        parsed = json.loads(errors) if errors else []
    except (ValueError, RecursionError):
        return [errors]
    if isinstance(parsed, list) and all(isinstance(line, str) for line in parsed):
        return parsed
    return [errors]


def cancel(store: JobStore, job_id: str, reason: str, console: Console) -> None:
    before = store.get(job_id)
    cancel_job(store, job_id, reason, actor=f"cli:{_operator()}")
    if before.state in ACTIVE_STATES:
        console.print(
            f"cancelled {job_id}: attempt {before.attempt} stops at its next step "
            "and its GPU is freed"
        )
    else:
        console.print(f"cancelled {job_id} (it was {before.state.value})")


def _operator() -> str:
    """Who cancelled, for the job's history."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "unknown"


def show_job(store: JobStore, job_id: str, console: Console) -> None:
    record = store.get(job_id)
    console.print(
        Text(record.job_id, style="bold"),
        f"state={record.state.value} version={record.version} attempt={record.attempt}",
    )
    if record.waiting_for:
        # The reason may name the job's team, a producer's tag.
        console.print(Text(f"waiting for: {outside(record.waiting_for, 500)}"))
    console.print_json(record.spec.canonical_json())
    history = Table(title="history")
    for column in ("at", "from", "to", "attempt", "actor", "reason"):
        history.add_column(column)
    for event in store.history(job_id):
        history.add_row(
            event.at.isoformat(),
            event.from_state.value if event.from_state else "-",
            event.to_state.value,
            str(event.attempt),
            outside(event.actor, 128),
            # Reasons quote workers' error messages.
            outside(event.reason, 2000),
        )
    console.print(history)


async def _serve(settings: Settings) -> None:
    stop = stop_on_signals()
    async with control_plane(settings, SystemClock()) as plane:
        settle_heap()
        log.info("control plane running; SIGTERM drains in-flight batches and stops")
        await plane.run(stop)
        log.info("stopped cleanly")


def _schema(of: str) -> dict[str, Any]:
    if of == "openapi":
        from orchestrator.api.app import openapi_document  # FastAPI: only this command needs it

        return openapi_document()
    return job_json_schema() if of == "job" else trace_json_schema()


def run(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo"]:
        # Its own flags (argparse hands a subcommand's options to the parent otherwise).
        from framefleet.demo import run as run_demo  # moto and amqtt: only the demo needs them

        return run_demo(argv[1:])
    args = _parser().parse_args(argv)
    console = Console()
    settings = load_settings(args.config)
    configure_logging(settings.log_level, settings.library_log_level, settings.log_format)
    if args.command == "serve":
        asyncio.run(_serve(settings))
    elif args.command == "schema":
        document = _schema(args.of)
        text = json.dumps(document, indent=2, sort_keys=True) + "\n"
        if args.output:
            args.output.write_text(text)
        else:
            sys.stdout.write(text)
    elif args.command == "submit":
        jobs_url = settings.require_jobs_queue()
        job = _job_from_args(args)
        asyncio.run(check_at_the_door(settings, job))
        message_id = submit_job(
            job,
            queue_url=jobs_url,
            region=settings.region,
            endpoint_url=settings.endpoint_url,
            max_message_bytes=settings.max_message_bytes,
            output_prefixes=settings.output_prefixes,
        )
        console.print(f"submitted, message id {message_id}")
    elif args.command == "simulate":
        run_simulate_command(args, console)
    elif args.command == "autoscaler":
        run_autoscaler_command(args, settings, console)
    elif args.command == "fleet":
        run_fleet_command(args, settings)
    elif args.command == "dead-letters":
        _, dead_letter_url = settings.require_queues()
        sqs = boto3.client("sqs", region_name=settings.region, endpoint_url=settings.endpoint_url)
        console.print(dead_letter_table(peek_dead_letters(sqs, dead_letter_url)))
    else:
        store = build_store(settings, SystemClock())
        try:
            if args.command == "jobs":
                state = JobState(args.state) if args.state else None
                output = JobsOutput(args.output) if args.output else None
                print_jobs(store.list_jobs(state, limit=args.limit), output, console)
            elif args.command == "job":
                show_job(store, args.job_id, console)
                costs = job_costs(store, SystemClock(), settings, args.job_id)
                if costs is not None:
                    console.print(costs)
            elif args.command in ("costs", "report"):
                run_costs_command(args, settings, store, SystemClock(), console)
            elif args.command == "cancel":
                cancel(store, args.job_id, args.reason, console)
            elif args.command == "tokens":
                run_token_commands(args, store.api_tokens, console, lambda: secret_writer(settings))
            elif args.command == "db":
                store.upgrade()
                console.print("database schema is at the newest migration")
        finally:
            store.dispose()
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    exit_with("framefleet", lambda: run(argv))
