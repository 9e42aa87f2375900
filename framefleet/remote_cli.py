"""The CLI against a deployment's API (issue 49): once `framefleet login URL` made a context,
`jobs`, `job`, `logs`, `cancel`, `retry`, `change`, `tokens`, `dead-letters`, `gpus`, `instances`,
`drain`, `history`, `report` and `costs export` go through the API with its token, so an
operator needs no way into the private database. Without a context they read the database
(the demo, local use). The HTTP calls are the producers' client's (framefleet_client)."""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import sys
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from rich.console import Console

from framefleet.contexts import Context, Contexts
from framefleet.costs_cli import utc_moment
from framefleet.remote_tables import fields_table, outside, rows_table, show, with_output
from kernel.errors import ConfigurationError

if TYPE_CHECKING:
    from framefleet_client.transport import Transport

# What a context serves; any other command reads the database (or needs none).
REMOTE_COMMANDS = frozenset(
    {
        "jobs",
        "job",
        "logs",
        "cancel",
        "retry",
        "change",
        "tokens",
        "dead-letters",
        "gpus",
        "instances",
        "drain",
        "history",
        "report",
        "costs",
    }
)
JOB_COLUMNS = ("job_id", "state", "priority", "model", "deadline", "attempt", "created_at")


def transport(context: Context) -> Transport:
    try:
        from framefleet_client.transport import Transport
    except ImportError:
        raise ConfigurationError(
            "the CLI's API mode needs the client: pip install ./client (framefleet-client)"
        ) from None
    return Transport(context.url, context.token)


def login(args: argparse.Namespace, console: Console) -> None:
    """Check the token against the API, then keep it as a context (the current one)."""
    from urllib.parse import urlsplit

    from framefleet_client.errors import Forbidden

    if args.token_stdin:
        token = sys.stdin.readline().strip()
    else:
        token = getpass.getpass(f"token for {args.url}: ").strip()
    if not token:
        raise ConfigurationError("no token given")
    name = args.context or urlsplit(args.url).hostname or "default"
    context = Context(name, args.url.rstrip("/"), token)
    # A token without the read scope (a submitter's) is refused with 403: valid all the same.
    with contextlib.suppress(Forbidden):
        transport(context).request("GET", "/v1/jobs", query={"limit": 1})
    contexts = Contexts.load()
    contexts.add(context)
    where = contexts.save()
    console.print(f"logged in to {context.url} as context {name!r} ({where}, mode 0600)")


def contexts_command(args: argparse.Namespace, console: Console) -> None:
    contexts = Contexts.load()
    if args.command == "logout":
        name = args.context or contexts.current
        if name is None:
            raise ConfigurationError("not logged in: no current context")
        contexts.remove(name)
        contexts.save()
        console.print(f"logged out of context {name!r}")
    elif args.action == "use":
        contexts.use(args.name)
        contexts.save()
        console.print(f"context {args.name!r} is current")
    else:
        rows = [
            {"current": "*" if c.name == contexts.current else "", "name": c.name, "url": c.url}
            for c in contexts.known.values()
        ]
        show(console, None, rows, rows_table("contexts", rows, ("current", "name", "url")))


def run_remote(args: argparse.Namespace, context: Context, console: Console) -> None:
    api = transport(context)
    handler = _HANDLERS.get(args.command)
    if handler is None:
        raise ConfigurationError(f"`framefleet {args.command}` does not go through the API")
    handler(api, args, console)


def _jobs(api: Transport, args: argparse.Namespace, console: Console) -> None:
    query: dict[str, str | int | None] = {"limit": min(args.limit, 500), "state": args.state}
    page = api.request("GET", "/v1/jobs", query=query)
    jobs = page["jobs"]
    if args.output == "json":
        for job in jobs:  # one object a line, as in the database mode
            sys.stdout.write(_json_line(job))
    elif args.output == "plain" or (args.output is None and not sys.stdout.isatty()):
        for job in jobs:
            sys.stdout.write("\t".join(str(job.get(c, "")) for c in JOB_COLUMNS) + "\n")
    else:
        console.print(rows_table(f"jobs ({len(jobs)})", jobs, JOB_COLUMNS))


def _job(api: Transport, args: argparse.Namespace, console: Console) -> None:
    job = api.request("GET", f"/v1/jobs/{args.job_id}")
    tables = [fields_table(args.job_id, job, skip=("history", "attempts", "spec"))]
    tables.append(rows_table("attempts", job.get("attempts", []), _ATTEMPT_COLUMNS))
    tables.append(rows_table("history", job.get("history", []), _HISTORY_COLUMNS))
    show(console, args.output, job, tables)


_ATTEMPT_COLUMNS = ("attempt", "worker_id", "gpu_index", "started_at", "ended_at", "outcome")
_HISTORY_COLUMNS = ("at", "from_state", "to_state", "attempt", "actor", "reason")
_INSTANCE_MOVES = ("at", "from_state", "to_state", "actor", "reason")


def _logs(api: Transport, args: argparse.Namespace, console: Console) -> None:
    logs = api.request("GET", f"/v1/jobs/{args.job_id}/logs")
    if args.output == "json":
        show(console, "json", logs, [])
        return
    for attempt in logs["attempts"]:
        console.rule(f"attempt {attempt['attempt']}")
        console.print(outside(attempt["log"], 1_000_000, keep_newlines=True))


def _cancel(api: Transport, args: argparse.Namespace, console: Console) -> None:
    answer = api.request("POST", f"/v1/jobs/{args.job_id}/cancel", {"reason": args.reason})
    console.print(f"cancelled {args.job_id}: it stops {answer['stops']}")


def _change_body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if args.priority is not None:
        body["priority"] = args.priority
    if args.deadline is not None:
        body["deadline"] = None if args.deadline == "none" else args.deadline
    return body


def _retry(api: Transport, args: argparse.Namespace, console: Console) -> None:
    answer = api.request("POST", f"/v1/jobs/{args.job_id}/retry", _change_body(args) or None)
    console.print(f"{args.job_id} runs again as {answer['job_id']} ({answer['state']})")


def _change(api: Transport, args: argparse.Namespace, console: Console) -> None:
    body = _change_body(args)
    if not body:
        raise ConfigurationError("give --priority, --deadline or both")
    answer = api.request("PATCH", f"/v1/jobs/{args.job_id}", body)
    console.print(f"{args.job_id}: priority {answer['priority']}, deadline {answer['deadline']}")


def _tokens(api: Transport, args: argparse.Namespace, console: Console) -> None:
    if args.action == "create":
        body: dict[str, Any] = {"name": args.name, "scopes": args.scopes.split(",")}
        if args.team:
            body["teams"] = args.team
        if args.expires_in_days is not None:
            expires = datetime.now(UTC) + timedelta(days=args.expires_in_days)
            body["expires_at"] = expires.isoformat()
        made = api.request("POST", "/v1/tokens", body)
        console.print(f"token {made['token_id']} ({made['name']}), shown once:")
        sys.stdout.write(made["token"] + "\n")
    elif args.action == "revoke":
        api.request("DELETE", f"/v1/tokens/{args.token_id}")
        console.print(f"revoked token {args.token_id}")
    else:
        listed = api.request("GET", "/v1/tokens")
        columns = ("token_id", "name", "scopes", "teams", "expires_at", "revoked_at")
        show(console, args.output, listed, rows_table("tokens", listed["tokens"], columns))


def _dead_letters(api: Transport, args: argparse.Namespace, console: Console) -> None:
    if args.action in ("redrive", "delete"):
        method, suffix = ("POST", "/redrive") if args.action == "redrive" else ("DELETE", "")
        api.request(method, f"/v1/dead-letters/{args.message_id}{suffix}")
        console.print(f"{args.action}: {args.message_id}")
        return
    letters = api.request("GET", "/v1/dead-letters")
    columns = ("message_id", "reason", "errors", "body")
    rows = letters["letters"]
    show(console, args.output, letters, rows_table(f"dead letters ({len(rows)})", rows, columns))


def _gpus(api: Transport, args: argparse.Namespace, console: Console) -> None:
    if args.action == "release":
        api.request("POST", f"/v1/gpus/{args.worker_id}/{args.gpu_index}/release")
        console.print(f"released GPU {args.gpu_index} of {args.worker_id}")
        return
    health = api.request("GET", "/v1/gpus")
    faults = ("at", "worker_id", "instance_id", "gpu_index", "kind", "job_id", "detail")
    tables = [
        rows_table("quarantined", health["quarantined"], ("worker_id", "gpu_index")),
        rows_table("faults (newest first)", health["faults"], faults),
    ]
    show(console, args.output, health, tables)


def _instances(api: Transport, args: argparse.Namespace, console: Console) -> None:
    if args.instance_id:
        record = api.request("GET", f"/v1/instances/{args.instance_id}")
        tables = [
            fields_table(args.instance_id, record, skip=("history",)),
            rows_table("history", record["history"], _INSTANCE_MOVES),
        ]
        show(console, args.output, record, tables)
        return
    fleet = api.request("GET", "/v1/fleet")
    columns = ("instance_id", "instance_type", "availability_zone", "market", "state")
    title = f"fleet: ${fleet['usd_per_hour']}/hour, {fleet['interruptions_24h']} interruptions"
    rows = fleet["instances"]
    show(console, args.output, fleet, rows_table(title, rows, (*columns, "usd_per_hour", "jobs")))


def _drain(api: Transport, args: argparse.Namespace, console: Console) -> None:
    verb = "terminate" if args.now else "drain"
    answer = api.request("POST", f"/v1/instances/{args.instance_id}/{verb}")
    console.print(f"{args.instance_id}: asked to {verb} ({answer['kind']})")


def _history(api: Transport, args: argparse.Namespace, console: Console) -> None:
    query = {"since": _iso(args.since), "until": _iso(args.until)}
    history = api.request("GET", "/v1/history", query=query)
    points = [
        {**p, "jobs": {k: v for k, v in p["jobs"].items() if v}, "instances": p["instances"]}
        for p in history["points"]
    ]
    columns = ("at", "jobs", "instances", "usd_per_hour", "interruptions", "deadline_misses")
    tables = [
        rows_table("history", points, columns),
        rows_table("spend per day", history["spend_per_day"], ("day", "usd")),
    ]
    show(console, args.output, history, tables)


def _report(api: Transport, args: argparse.Namespace, console: Console) -> None:
    if args.since and args.until:
        query = {"since": _iso(args.since), "until": _iso(args.until)}
    else:
        query = {"period": args.period}
    if args.by:
        groups = api.request("GET", "/v1/costs/groups", query={**query, "by": args.by})
        title = f"spend by {args.by}: ${groups['total_usd']}"
        show(console, args.output, groups, rows_table(title, groups["groups"], ("group", "usd")))
        return
    costs = api.request("GET", "/v1/costs", query=query)
    by_category = [{"category": k, "usd": v} for k, v in costs["by_category"].items()]
    tables = [
        fields_table("costs", costs, skip=("by_category", "by_tag")),
        rows_table("by category", by_category, ("category", "usd")),
        rows_table("by tag", costs["by_tag"], ("tag", "value", "usd")),
    ]
    show(console, args.output, costs, tables)


def _costs(api: Transport, args: argparse.Namespace, console: Console) -> None:
    if args.output.suffix.lower() != ".csv":
        raise ConfigurationError("through the API, costs export writes .csv")
    query = {"since": _iso(args.since), "until": _iso(args.until)}
    export = api.request("GET", "/v1/costs/focus", query=query)
    args.output.write_text(export["csv"], encoding="utf-8", newline="")
    console.print(f"{export['rows']} FOCUS 1.0 rows, ${export['total_usd']}, to {args.output}")
    for note in export["incomplete"]:
        console.print(f"incomplete: {note}", markup=False, highlight=False)


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _json_line(value: Any) -> str:
    return json.dumps(value, sort_keys=True) + "\n"


_HANDLERS = {
    "jobs": _jobs,
    "job": _job,
    "logs": _logs,
    "cancel": _cancel,
    "retry": _retry,
    "change": _change,
    "tokens": _tokens,
    "dead-letters": _dead_letters,
    "gpus": _gpus,
    "instances": _instances,
    "drain": _drain,
    "history": _history,
    "report": _report,
    "costs": _costs,
}


def add_commands(commands: Any) -> None:
    """The commands that exist for the API mode (besides those both modes have)."""
    login_ = commands.add_parser("login", help="keep a deployment's API URL and token")
    login_.add_argument("url", help="the API's URL: https://framefleet.example.com")
    login_.add_argument("--token-stdin", action="store_true", help="read the token from stdin")
    commands.add_parser("logout", help="forget the current context (or --context's)")
    contexts = commands.add_parser("contexts", help="the deployments logged in to")
    actions = contexts.add_subparsers(dest="action")
    actions.add_parser("list", help="every context (the current one starred)")
    use = actions.add_parser("use", help="make a context current")
    use.add_argument("name")
    for name, text in (
        ("retry", "run a failed job again as a new job (<id>-r1)"),
        ("change", "change a queued job's priority or deadline"),
    ):
        command = commands.add_parser(name, help=text)
        command.add_argument("job_id")
        command.add_argument("--priority", type=int, help="0 lowest, 9 most urgent")
        command.add_argument("--deadline", help="ISO 8601 with a time zone; none: remove it")
    logs = with_output(commands.add_parser("logs", help="a job's log lines, per attempt"))
    logs.add_argument("job_id")
    gpus = with_output(commands.add_parser("gpus", help="GPU faults and quarantines"))
    gpu_actions = gpus.add_subparsers(dest="action")
    release = gpu_actions.add_parser("release", help="release a quarantined GPU")
    release.add_argument("worker_id")
    release.add_argument("gpu_index", type=int)
    instances = with_output(commands.add_parser("instances", help="the fleet, or one instance"))
    instances.add_argument("instance_id", nargs="?")
    drain = commands.add_parser("drain", help="drain an instance (its jobs finish), then end it")
    drain.add_argument("instance_id")
    drain.add_argument("--now", action="store_true", help="its jobs checkpoint and move now")
    history = with_output(commands.add_parser("history", help="what happened (24 h by default)"))
    history.add_argument("--since", type=utc_moment)
    history.add_argument("--until", type=utc_moment)


# Exit statuses (README, "The command line"): 2 usage or configuration (argparse's too),
# 3 not found, 4 refused (unauthorized, forbidden, conflict, invalid, rate limited),
# 5 the API failed or could not be reached.
NOT_FOUND, REFUSED, SERVER = 3, 4, 5


def exit_status(error: Exception) -> int | None:
    """The exit status for an error the API mode expects (None: not one of them)."""
    from framefleet_client import errors

    if isinstance(error, errors.NotFound):
        return NOT_FOUND
    if isinstance(error, errors.ServerError | errors.Unreachable):
        return SERVER
    if isinstance(error, errors.ApiError):
        return REFUSED
    return None
