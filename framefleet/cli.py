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
from framefleet.contexts import Contexts
from framefleet.control_plane import build_store, control_plane
from framefleet.costs_cli import add_commands as add_costs_commands
from framefleet.costs_cli import job_costs
from framefleet.costs_cli import run_command as run_costs_command
from framefleet.dead_letters_cli import dead_letters
from framefleet.fleet_cli import add_commands as add_fleet_commands
from framefleet.fleet_cli import run_command as run_fleet_command
from framefleet.heap import settle_heap
from framefleet.jobs_output import JobsOutput, print_jobs
from framefleet.remote_cli import (
    NOT_FOUND,
    REMOTE_COMMANDS,
    contexts_command,
    exit_status,
    login,
    run_remote,
)
from framefleet.remote_cli import add_commands as add_remote_commands
from framefleet.remote_tables import outside, with_output
from framefleet.settings import Settings, load_settings
from framefleet.simulate_cli import add_commands as add_simulate_commands
from framefleet.simulate_cli import run_command as run_simulate_command
from framefleet.submit_check import check_at_the_door
from framefleet.tokens_cli import add_commands as add_token_commands
from framefleet.tokens_cli import run_command as run_token_commands
from kernel.clock import SystemClock, stop_on_signals
from kernel.errors import ConfigurationError, JobNotFound, NotFound
from kernel.job_spec import job_json_schema
from kernel.job_state import ACTIVE_STATES, JobState
from kernel.outside_text import printable
from kernel.settings_support import configure_logging, exit_with
from orchestrator.aws.secrets import SecretWriter
from orchestrator.client import submit_job
from orchestrator.control.cancel import cancel_job
from orchestrator.store.job_store import JobStore

log = logging.getLogger("framefleet")
# Commands with no database mode (yet): a context is needed.
API_ONLY = frozenset({"logs", "retry", "change", "gpus", "instances", "drain", "history"})


def secret_writer(settings: Settings) -> SecretWriter:
    client = boto3.client(
        "secretsmanager", region_name=settings.region, endpoint_url=settings.endpoint_url
    )
    return SecretWriter(client)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="framefleet", description=__doc__)
    parser.add_argument("--config", type=Path, help="TOML settings file (FRAMEFLEET_CONFIG)")
    parser.add_argument(
        "--context",
        help="the deployment (`framefleet login`) to go through (FRAMEFLEET_CONTEXT; default: "
        "the current one; none logged in: the database)",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    commands.add_parser("serve", help="run the control plane (and the API, when api.port is set)")

    jobs = commands.add_parser("jobs", help="list jobs as a table")
    jobs.add_argument("--state", choices=[s.value for s in JobState])
    jobs.add_argument("--limit", type=int, default=200)
    jobs.add_argument(
        "-o",
        "--output",
        choices=[o.value for o in JobsOutput],
        help="table (on a terminal, the default), plain (tab-separated whole values, the "
        "default in a pipe) or json (one object a line)",
    )

    job = with_output(commands.add_parser("job", help="one job: spec, state, history"))
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

    letters = with_output(
        commands.add_parser("dead-letters", help="the dead-letter queue (read, not consumed)")
    )
    letter_actions = letters.add_subparsers(dest="action")
    letter_actions.add_parser("list", help="every message refused, with why (the default)")
    for action, text in (("redrive", "send it to the jobs queue again"), ("delete", "drop it")):
        letter_actions.add_parser(action, help=text).add_argument("message_id")

    schema = commands.add_parser("schema", help="print or write a JSON Schema")
    schema.add_argument("--output", type=Path)
    schema.add_argument(
        "--of",
        choices=["job", "trace", "openapi", "settings"],
        default="job",
        help="the job message, one zone file of a spot trace, the HTTP API (OpenAPI 3.1), or "
        "every setting's kind (what the Terraform module checks its settings input against)",
    )

    db = commands.add_parser("db", help="database maintenance")
    db.add_argument("action", choices=["upgrade"])

    add_autoscaler_commands(commands)
    add_simulate_commands(commands)
    add_fleet_commands(commands)
    add_costs_commands(commands)
    add_token_commands(commands)
    add_remote_commands(commands)
    demo = commands.add_parser(
        "demo", help="the whole system on this machine (make demo)", add_help=False
    )
    demo.add_argument("demo_args", nargs="*", help="see `framefleet demo --help`")
    for name, command in commands.choices.items():
        if name != "demo":  # --context after the command too, as kubectl takes it
            command.add_argument("--context", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
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
    if of == "settings":
        from framefleet.settings_table import settings_table

        return settings_table()
    return job_json_schema() if of == "job" else trace_json_schema()


def run(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo"]:
        # Its own flags (argparse hands a subcommand's options to the parent otherwise).
        from framefleet.demo import run as run_demo  # moto and amqtt: only the demo needs them

        return run_demo(argv[1:])
    args = _parser().parse_args(argv)
    console = Console()
    if args.command == "login":
        login(args, console)
        return 0
    if args.command in ("logout", "contexts"):
        contexts_command(args, console)
        return 0
    if args.command in REMOTE_COMMANDS:
        context = Contexts.load().selected(args.context)
        if context is not None:
            run_remote(args, context, console)
            return 0
    if args.command in API_ONLY:
        raise ConfigurationError(f"`framefleet {args.command}` goes through the API: log in first")
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
        dead_letters(settings, args, console)
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


def _run_with_status(argv: Sequence[str] | None) -> int:
    """`run`, with the exit statuses the README lists: 3 not found, 4 refused, 5 the API
    failed (an expected error's one line on stderr, as exit_with prints it)."""
    try:
        return run(argv)
    except (JobNotFound, NotFound) as error:
        print(f"framefleet: error: {error}", file=sys.stderr)
        return NOT_FOUND
    except Exception as error:
        status = exit_status(error)
        if status is None:
            raise
        print(f"framefleet: error: {printable(str(error), 2000)}", file=sys.stderr)
        return status


def main(argv: Sequence[str] | None = None) -> None:
    exit_with("framefleet", lambda: _run_with_status(argv))
