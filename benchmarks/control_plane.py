"""Control-plane throughput: simulated workers speaking the real protocol over a real Mosquitto
(no pipeline), in a process of their own (`benchmarks/sim_workers.py`), against the real
control-plane service and store; `--replicas N` runs N services on one database, each with
its leader lease, each in a process of its own (`benchmarks/cp_replica.py`; one leads, the
others stand by).

    .venv/bin/python -m benchmarks.control_plane [--workers 1000] [--jobs 10000]
        [--database postgresql+psycopg://postgres@127.0.0.1/test] [--replicas 3]

Reports scheduling decision time (p50, p99), assignments per second, jobs completed per second,
and the latency from a spot notice to the job's assignment on another worker (p50, p99).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table
from sqlalchemy import create_engine, text

from benchmarks.common import write_result
from framefleet.local_ports import free_port
from kernel.clock import SystemClock
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head
from tests.support.mosquitto import LocalMosquitto

NOW = datetime.now(UTC)


OUTPUT_PREFIX = "s3://bench/out/"


def own_schema(database: str) -> str:
    """A PostgreSQL schema of this run's own in that database (reruns never see old jobs)."""
    if not database.startswith("postgresql"):
        return database
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(database, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    admin.dispose()
    return f"{database}{'&' if '?' in database else '?'}options=-csearch_path%3D{schema}"


# The benchmarks' job: small, and no pipeline runs it (the simulated workers "run" it).
BENCH_JOB = {
    "schema": "framefleet.job/v1",
    "model": "wan/bench",
    "prompt": "bench",
    "width": 64,
    "height": 64,
    "num_frames": 9,
    "steps": 10,
    "output": OUTPUT_PREFIX,
}


def bench_submission(n: int, **fields: object) -> Submission:
    """The n-th job (its id and seed from n) as the intake would accept it."""
    spec = parse_job({**BENCH_JOB, "job_id": f"j{n:06d}", "seed": n, **fields}, now=None)
    return Submission(spec, f"m{n}")


def queue_jobs(store: JobStore, jobs: int) -> None:
    for start in range(0, jobs, 1000):
        store.intake.accept_batch(
            [bench_submission(i, priority=i % 10) for i in range(start, min(start + 1000, jobs))]
        )


def progress(store: JobStore) -> tuple[int, int]:
    """Jobs succeeded, and assignments made (each one opened an attempt)."""
    with store.engine.connect() as connection:
        attempts = connection.execute(text("SELECT count(*) FROM job_attempts")).scalar_one()
    return store.count_by_state().get(JobState.SUCCEEDED, 0), int(attempts)


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q)) if values else float("nan")


async def run(
    workers: int,
    jobs: int,
    connections: int,
    job_seconds: float,
    interruptions: int,
    database: str | None,
    replicas: int,
) -> None:
    console = Console(width=140)
    folder = Path(tempfile.mkdtemp(prefix="framefleet-bench-cp-"))
    broker = LocalMosquitto(folder, free_port())
    broker.config.write_text(broker.config.read_text() + "max_queued_messages 100000\n")
    broker.start()
    url = own_schema(database) if database else f"sqlite:///{folder / 'cp.db'}"
    engine = make_engine(url)
    upgrade_to_head(engine)
    store = JobStore(engine, SystemClock())
    queue_jobs(store, jobs)
    console.print(f"{jobs} jobs queued; starting {workers} simulated workers in their process")
    expected = jobs * job_seconds / workers * 2 + 10
    results_file = folder / "sim.json"
    sim = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "benchmarks.sim_workers",
        "--port",
        str(broker.port),
        "--workers",
        str(workers),
        "--connections",
        str(connections),
        "--job-seconds",
        str(job_seconds),
        "--interruptions",
        str(interruptions),
        "--every",
        str(expected / (interruptions + 1)),
        "--results",
        str(results_file),
        stdout=asyncio.subprocess.PIPE,
    )
    assert sim.stdout is not None
    while (await sim.stdout.readline()).strip() != b"ready":
        pass
    replica_files = [folder / f"replica-{index}.json" for index in range(replicas)]
    processes = []
    for index, replica_file in enumerate(replica_files):  # each its own process, as deployed
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.cp_replica",
            "--port",
            str(broker.port),
            "--database",
            url,
            "--name",
            f"bench-{index}",
            "--results",
            str(replica_file),
            stdout=asyncio.subprocess.PIPE,
        )
        assert process.stdout is not None
        while (await process.stdout.readline()).strip() != b"ready":
            pass
        processes.append(process)
    started = time.perf_counter()
    last_report = started
    # The steady state: until 90% of the jobs are done. The last few are the ones the spot
    # notices keep hitting (each restarts its 10 s), which says nothing of the control plane.
    steady: tuple[float, int] | None = None
    while True:
        done, assigned = await asyncio.to_thread(progress, store)
        if time.perf_counter() - last_report > 5:
            seconds = time.perf_counter() - started
            console.print(f"  {seconds:5.0f}s: {done} succeeded, {assigned} assignments")
            last_report = time.perf_counter()
        if steady is None and done >= 0.9 * jobs:
            steady = (time.perf_counter() - started, assigned)
        if done >= jobs:
            break
        await asyncio.sleep(0.5)  # the progress report's pace, not a wait for an outcome
    elapsed = time.perf_counter() - started
    for each in (sim, *processes):
        each.terminate()
        await each.wait()
    broker.stop()
    store.dispose()
    latencies = json.loads(results_file.read_text())["notice_to_running_s"]
    measured = [json.loads(replica_file.read_text()) for replica_file in replica_files]
    assignments = sum(int(m["assignments"]) for m in measured)
    decisions = [d for m in measured for d in m["schedule_seconds"]]
    kind = "postgresql" if database and "postgres" in database else "sqlite"
    results = {
        "workers": workers,
        "jobs": jobs,
        "connections": connections,
        "job_seconds": job_seconds,
        "database": kind,
        "replicas": replicas,
        "elapsed_s": elapsed,
        "assignments": assignments,
        "assignments_per_s": assignments / elapsed,
        "steady_assignments_per_s": steady[1] / steady[0] if steady else float("nan"),
        "steady_seconds": steady[0] if steady else float("nan"),
        "jobs_per_s": jobs / elapsed,
        "schedule_p50_ms": pct(decisions, 50) * 1000,
        "schedule_p99_ms": pct(decisions, 99) * 1000,
        "interruptions": len(latencies),
        "notice_to_reassigned_p50_s": pct(latencies, 50),
        "notice_to_reassigned_p99_s": pct(latencies, 99),
    }
    table = Table(
        title=f"control plane: {workers} simulated workers (own process), {jobs} jobs, "
        f"{kind}, {replicas} replica(s), Mosquitto"
    )
    table.add_column("measure")
    table.add_column("value", justify="right")
    rows = [
        (
            "scheduling decision p50 / p99",
            f"{results['schedule_p50_ms']:.1f} / {results['schedule_p99_ms']:.1f} ms",
        ),
        ("assignments per second, to 90% done", f"{results['steady_assignments_per_s']:.0f}"),
        ("assignments per second, whole run", f"{results['assignments_per_s']:.0f}"),
        ("jobs completed per second", f"{results['jobs_per_s']:.0f}"),
        ("interruptions handled", str(results["interruptions"])),
        (
            "notice -> reassigned p50 / p99",
            f"{results['notice_to_reassigned_p50_s']:.2f} / "
            f"{results['notice_to_reassigned_p99_s']:.2f} s",
        ),
        ("wall time", f"{elapsed:.0f} s"),
    ]
    for measure, value in rows:
        table.add_row(measure, value)
    console.print(table)
    console.print(f"wrote {write_result(f'control_plane-{kind}-{replicas}', results)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--job-seconds", type=float, default=10.0)
    parser.add_argument("--interruptions", type=int, default=50)
    parser.add_argument(
        "--database",
        help="database URL (default: a new SQLite file); on "
        "PostgreSQL the run makes a schema of its own there",
    )
    parser.add_argument("--replicas", type=int, default=1, help="control planes, one leading")
    args = parser.parse_args()
    asyncio.run(
        run(
            args.workers,
            args.jobs,
            args.connections,
            args.job_seconds,
            args.interruptions,
            args.database,
            args.replicas,
        )
    )


if __name__ == "__main__":
    main()
