"""`framefleet demo` (`make demo`): the whole product on this machine, with nothing to set up.

The embedded defaults (moto, amqtt, SQLite under .demo/) and then the real processes, each with
its own settings: `framefleet serve`, the autoscaler loop, the local fleet runner (one
`framefleet-worker serve` per instance the autoscaler launched) and a producer sending jobs
through SQS. The market is a real spot trace replayed in compressed time: prices, capacity
errors and interruptions (with and without notice) come from it. At the end: every video in
./demo-output/, a timeline, the cost against on-demand only, and a verdict; the exit status is 1
if a job was lost, finished twice, failed or missed its deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import boto3
import tomli_w
from rich.console import Console
from rich.live import Live

from autoscaler.ec2.adapter import observed_instance
from autoscaler.ec2.ports import FLEET_TAG
from autoscaler.market.trace import Trace, load_trace
from framefleet.control_plane import build_store
from framefleet.demo_finance import finance_report
from framefleet.demo_outputs import check_resumed, download_videos
from framefleet.demo_pace import IdleHold, ReplayPacer, StoryHold, imminent, pace_reason
from framefleet.demo_producer import demo_jobs
from framefleet.demo_progress import Progress, view
from framefleet.demo_report import (
    interruptions,
    judge,
    read_timeline,
    resumed_from_checkpoint,
)
from framefleet.demo_stack import (
    FLEET_ID,
    REGION,
    DemoAws,
    DemoOptions,
    Processes,
    create_aws,
    demo_processes,
    embedded_services,
    plane_settings,
    publish_tiny_model,
    worker_settings,
)
from framefleet.demo_tables import (
    RunFacts,
    resume_table,
    summary_facts,
    summary_table,
    timeline_table,
)
from framefleet.local_ports import free_port
from framefleet.settings import load_settings
from kernel.clock import SystemClock
from kernel.errors import ConfigurationError
from kernel.replay_clock import PaceFile, ReplayClock
from kernel.settings_support import exit_with
from orchestrator.api.auth import Scope, create_token
from orchestrator.aws.dead_letters import peek_dead_letters
from orchestrator.costs.ledger import CostSettings
from orchestrator.store.job_store import JobStore

ROOT = Path(".demo")
OUTPUT = Path("demo-output")
TIMELINE = ROOT / "timeline.jsonl"
CONSOLE_TOKEN = ROOT / "console-token"
# A moment of the V100 trace when the spot zones have capacity and lose it within about ten
# minutes (us-east-1c and 1d at 13:43, 1f at 13:47), then get it back within minutes: with the
# market held until spot workers work, the first loss finds jobs running there, two or three
# wall seconds into the first spot work, so a warm worker's short render still meets it.
DEFAULT_MOMENT = datetime(2023, 3, 7, 13, 36, tzinfo=UTC)
log = logging.getLogger("framefleet.demo")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="framefleet demo", description=__doc__)
    defaults = DemoOptions()
    parser.add_argument("--jobs", type=int, default=defaults.jobs)
    parser.add_argument(
        "--speed", type=float, default=defaults.speed, help="trace seconds per wall second"
    )
    parser.add_argument("--trace", type=Path, default=defaults.trace)
    parser.add_argument("--trace-start", help="trace moment to start at, ISO 8601")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--keep", action="store_true", help="leave it running after the jobs")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for the jobs")
    parser.add_argument("--api-port", type=int, default=0, help="the console's (0: a free one)")
    return parser


def _options(args: argparse.Namespace) -> DemoOptions:
    start = datetime.fromisoformat(args.trace_start) if args.trace_start else None
    if start is not None and start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    if args.jobs < 1 or args.speed <= 0:
        raise ConfigurationError("--jobs and --speed must be positive")
    return DemoOptions(
        jobs=args.jobs,
        speed=args.speed,
        trace=args.trace,
        trace_start=start,
        seed=args.seed,
        produce_over_seconds=5.0 * args.jobs,
        api_port=args.api_port or free_port(),
    )


def _fresh_folders() -> None:
    """Each run starts from nothing: a new store, new queues, no old videos."""
    shutil.rmtree(ROOT, ignore_errors=True)
    shutil.rmtree(OUTPUT, ignore_errors=True)
    ROOT.mkdir()


@dataclass(frozen=True)
class DemoRun:
    """One run's embedded parts and what it expects: what the live view and the end read."""

    store: JobStore
    aws: DemoAws
    registry: Path
    expected: tuple[str, ...]
    trace: Trace
    replay: ReplayClock
    pacer: ReplayPacer
    idle: IdleHold
    story: StoryHold
    started: datetime
    api_port: int
    costs: CostSettings


async def run_demo(options: DemoOptions, console: Console, keep: bool, time_limit: float) -> int:
    trace = load_trace(options.trace)
    trace_start = options.trace_start or DEFAULT_MOMENT
    trace.tick(trace_start)  # a start outside the trace is one line, now
    _fresh_folders()
    async with embedded_services() as (endpoint, mqtt_port):
        aws = create_aws(endpoint)
        console.print(f"moto at {endpoint}, amqtt at 127.0.0.1:{mqtt_port}, store {ROOT}/")
        registry = await publish_tiny_model(endpoint, ROOT)
        epoch = datetime.now(UTC)
        config, worker_config = ROOT / "framefleet.toml", ROOT / "worker.toml"
        last = trace.end - trace.gap  # the replay stands still here, never past its trace
        plane = plane_settings(aws, mqtt_port, ROOT, options, epoch, trace_start, last, registry)
        config.write_text(tomli_w.dumps(plane))
        worker_config.write_text(tomli_w.dumps(worker_settings(aws, mqtt_port, registry)))
        planned = demo_jobs(options.jobs, options.seed, epoch, options.produce_over_seconds)
        settings = load_settings(config)
        assert settings.replay is not None
        assert settings.replay.pace_file is not None
        replay = settings.replay.clock()
        pacer = ReplayPacer(PaceFile(settings.replay.pace_file), replay, SystemClock())
        pacer.hold_from_the_start("the fleet is starting")
        # One set of books: the demo reads the store on the wall clock, as the console does.
        store = build_store(settings, SystemClock())
        _console_token(store)
        expected = tuple(job.job_id for job in planned)
        run = DemoRun(
            store,
            aws,
            registry,
            expected,
            trace,
            replay,
            pacer,
            IdleHold(),
            StoryHold(),
            epoch,
            options.api_port,
            settings.costs.ledger(),
        )
        try:
            async with demo_processes(ROOT) as processes:
                await _start_processes(processes, config, worker_config, options, epoch)
                finished = await _watch(run, processes.failed, console, time_limit)
                console.print()
                if not finished:
                    console.print(f"[red]the jobs did not finish within {time_limit:.0f} s[/]")
                if keep:
                    console.print("--keep: everything runs on; Ctrl-C stops it")
                    await asyncio.Event().wait()
            return await _the_end(run, console)
        finally:
            store.dispose()


def _console_token(store: JobStore) -> None:
    """A token for the console, in a file only this user may read."""
    _, token = create_token(store.api_tokens, "demo", (Scope.READ, Scope.SUBMIT, Scope.CANCEL))
    CONSOLE_TOKEN.touch(mode=0o600)
    CONSOLE_TOKEN.write_text(token + "\n")


def _answers(url: str) -> bool:
    """Whether an HTTP server answers at `url` (any status: it listens)."""
    try:
        with urllib.request.urlopen(url, timeout=1):  # noqa: S310 (our http:// URL)
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


async def _start_processes(
    processes: Processes, config: Path, worker_config: Path, options: DemoOptions, epoch: datetime
) -> None:
    base = ["-m", "framefleet", "--config", str(config)]
    await processes.start("serve", *base, "serve")
    await processes.start("autoscaler", *base, "autoscaler", "run")
    await processes.start(
        "fleet",
        *base,
        "fleet",
        "local",
        "--workdir",
        str(ROOT / "fleet"),
        "--worker-config",
        str(worker_config),
        "--timeline",
        str(TIMELINE),
        "--min-notice-seconds",
        str(options.min_notice_seconds),
        "--silent-every",
        str(options.silent_every),
    )
    await processes.start(
        "producer",
        "-m",
        "framefleet.demo_producer",
        "--config",
        str(config),
        "--jobs",
        str(options.jobs),
        "--seed",
        str(options.seed),
        "--over",
        str(options.produce_over_seconds),
        "--start",
        epoch.isoformat(),
    )


async def _watch(
    run: DemoRun, failed: Callable[[], list[str]], console: Console, time_limit: float
) -> bool:
    """The live view until every expected job is in a terminal state."""
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=run.aws.endpoint)
    wanted = set(run.expected)

    def progress() -> Progress:
        now = datetime.now(UTC)
        jobs = [j for j in run.store.list_jobs() if j.job_id in wanted]
        # The market waits for the fleet: the pace every replay clock of the demo reads.
        lives = run.store.cost_facts.instance_lives(run.started, now)
        placements = [p for p in run.store.placements() if p.job.job_id in wanted]
        timeline = read_timeline(TIMELINE)
        run.story.told = any(e["kind"] == "spot_notice" and e.get("busy") for e in timeline)
        coming = imminent(run.trace, run.replay.now(), run.replay.speed)
        run.pacer.update(pace_reason(lives, jobs, placements, now, run.idle, run.story, coming))
        found = ec2.describe_instances(
            Filters=[
                {"Name": f"tag:{FLEET_TAG}", "Values": [FLEET_ID]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ]
        )
        instances = [observed_instance(i) for r in found["Reservations"] for i in r["Instances"]]
        return Progress(now, run.started, jobs, len(wanted), instances, timeline, run.pacer.why)

    console_url = f"http://127.0.0.1:{run.api_port}/console"
    announced = False
    deadline = asyncio.get_running_loop().time() + time_limit
    with Live(console=console, refresh_per_second=2) as live:
        while asyncio.get_running_loop().time() < deadline:
            current = await asyncio.to_thread(progress)
            live.update(view(current, run.trace, run.replay))
            if not announced and await asyncio.to_thread(_answers, console_url):
                announced = True  # said once it listens, not before
                live.console.print(f"the console answers: {console_url} (token: {CONSOLE_TOKEN})")
            if sum(1 for j in current.jobs if j.state.terminal) == len(wanted):
                return True
            broken = failed()
            if broken:
                console.print(f"[red]stopped: {', '.join(broken)}; see {ROOT}/logs[/]")
                return False
            await asyncio.sleep(0.5)  # the view's refresh interval
    return False


async def _the_end(run: DemoRun, console: Console) -> int:
    ended = datetime.now(UTC)  # the bill ends now, before the checks below take their time
    report, eml = finance_report(
        run.store, run.costs, run.started, ended, run.aws.endpoint, REGION, ROOT / "finance"
    )
    wanted = set(run.expected)
    records = {r.job_id: r for r in run.store.list_jobs() if r.job_id in wanted}
    histories = {job_id: run.store.history(job_id) for job_id in records}
    timeline = read_timeline(TIMELINE)
    verdict = judge(run.expected, records, histories, ended)
    done = [records[job_id] for job_id in verdict.succeeded]
    videos = download_videos(run.aws.endpoint, done, OUTPUT)
    # The jobs that went on from a checkpoint on another instance: each is rendered again
    # without interruption, and the two videos must be the same bytes.
    went_on = [
        r for r in done if resumed_from_checkpoint(run.store.cost_facts.attempts_of(r.job_id))
    ]
    console.print(f"rendering {len(went_on)} resumed job(s) again without interruption ...")
    checks = await check_resumed(run.aws.endpoint, run.registry, ROOT, went_on, videos)
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=run.aws.endpoint)
    dead = [letter.reason for letter in peek_dead_letters(sqs, run.aws.dead_letter_url)]
    console.print(timeline_table(timeline, histories, run.started))
    if checks:
        console.print(resume_table(checks))
    facts = RunFacts(
        verdict,
        interruptions(timeline),
        report.summary,
        len(videos),
        checks,
        len(went_on),
        dead,
        run.pacer.held_seconds,
    )
    console.print(summary_table(facts))
    console.print(f"the finance email: sent through SES (moto), kept as {eml}")
    (ROOT / "summary.json").write_text(json.dumps(summary_facts(facts, videos, eml), indent=2))
    console.print(f"videos in {OUTPUT}/, logs in {ROOT}/logs/, store {ROOT}/framefleet.db")
    return 0 if facts.ok else 1


def run(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    console = Console(width=max(Console().width, 140))
    # moto logs every request, and answers an action it lacks (GetAWSDefaultServiceQuota) with
    # a 500 and a traceback on this terminal; our processes log what they make of the answer.
    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    logging.getLogger("amqtt").setLevel(logging.WARNING)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(name, "demo")
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    _quiet_progress_bars()
    return asyncio.run(run_demo(_options(args), console, args.keep, args.timeout))


def _quiet_progress_bars() -> None:
    """Loading and saving the tiny model draws progress bars; the live view is the demo's."""
    import diffusers.utils.logging
    import transformers.utils.logging

    diffusers.utils.logging.disable_progress_bar()
    transformers.utils.logging.disable_progress_bar()


def main(argv: Sequence[str] | None = None) -> None:
    exit_with("framefleet demo", lambda: run(argv))


if __name__ == "__main__":
    main()
