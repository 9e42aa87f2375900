"""One worker floods the control plane; do the healthy workers notice?

A real Mosquitto with the shipped broker's bounds, the control plane in a process of its own
(`benchmarks/cp_replica.py`), healthy simulated workers in another (`benchmarks/sim_workers.py`,
jobs of `--job-seconds`), jobs arriving at `--arrivals` a second, and a flooder process that
publishes `--rate` messages a second for `--seconds` on its own worker's topic: garbage, or
valid-but-useless heartbeats with 20 outcomes each (`--useless`). The run is quiet for
`--calm` seconds, floods, then is quiet again for `--calm` seconds.

    .venv/bin/python -m benchmarks.worker_flood [--rate 10000] [--seconds 10] [--useless]

Reports, before / during / after the flood: the p50 and p99 of a job's wait from queued to
assigned; healthy workers found suspect or lost; messages the flooder sent and the control
plane dropped unread; the control plane's peak memory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from benchmarks.common import write_result
from benchmarks.control_plane import bench_submission
from framefleet.local_ports import free_port
from kernel.clock import SystemClock
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head
from tests.support.mosquitto import LocalMosquitto

SHIPPED_BROKER = Path(__file__).parent.parent / "infra" / "mosquitto" / "mosquitto.conf"
FLOODER = "i-0f100d0000000000f"


def shipped_bounds() -> str:
    """The shipped broker's per-client bounds (its `max_` lines), for the local broker."""
    lines = SHIPPED_BROKER.read_text().splitlines()
    return "".join(f"{line}\n" for line in lines if line.startswith("max_"))


async def started(*command: str) -> asyncio.subprocess.Process:
    """A process of the benchmark's, once it has printed `ready`."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", *command, stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    while (await process.stdout.readline()).strip() != b"ready":
        pass
    return process


async def arrivals(store: JobStore, per_second: float, until: float) -> None:
    """Jobs at a steady pace, as producers send them."""
    n = 0
    while time.time() < until:
        await asyncio.to_thread(store.intake.accept_batch, [bench_submission(n)])
        n += 1
        await asyncio.sleep(1 / per_second)  # the producers' pace


def phase_stats(waits: list[tuple[float, float]], start: float, end: float) -> dict[str, float]:
    values = np.array([w for at, w in waits if start <= at < end])
    if not len(values):
        return {"jobs": 0, "p50_s": float("nan"), "p99_s": float("nan")}
    return {
        "jobs": len(values),
        "p50_s": float(np.percentile(values, 50)),
        "p99_s": float(np.percentile(values, 99)),
    }


async def run(args: argparse.Namespace) -> None:
    console = Console(width=140)
    folder = Path(tempfile.mkdtemp(prefix="framefleet-bench-flood-"))
    broker = LocalMosquitto(folder, free_port())
    broker.config.write_text(broker.config.read_text() + shipped_bounds())
    broker.start()
    url = f"sqlite:///{folder / 'cp.db'}"
    engine = make_engine(url)
    upgrade_to_head(engine)
    store = JobStore(engine, SystemClock())
    port = str(broker.port)
    sim = await started(
        "benchmarks.sim_workers",
        *("--port", port, "--workers", str(args.workers), "--connections", "4"),
        *("--job-seconds", str(args.job_seconds), "--interruptions", "0"),
        *("--results", str(folder / "sim.json")),
    )
    plane = await started(
        "benchmarks.cp_replica",
        *("--port", port, "--database", url, "--name", "flood-0"),
        *("--results", str(folder / "cp.json")),
        # Without a budget: what the flood does to a control plane that reads everything.
        *(["--messages-per-second", "1e9", "--message-burst", "1e9"] if args.unbudgeted else []),
    )
    start = time.time()
    flood_at, flood_end = start + args.calm, start + args.calm + args.seconds
    end = flood_end + args.calm
    console.print(
        f"{args.workers} healthy workers, {args.arrivals} jobs/s; flood of {args.rate}/s "
        f"for {args.seconds} s after {args.calm} s"
    )
    producer = asyncio.create_task(arrivals(store, args.arrivals, end))
    await asyncio.sleep(max(0.0, flood_at - time.time()))  # the schedule of the experiment
    flooder = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "benchmarks.flooder",
        *("--port", port, "--worker-id", FLOODER, "--rate", str(args.rate)),
        *("--seconds", str(args.seconds), *(["--useless"] if args.useless else [])),
        stdout=asyncio.subprocess.PIPE,
    )
    flooded, _ = await flooder.communicate()
    sent = json.loads(flooded)
    await producer
    for process in (plane, sim):
        process.terminate()
        await process.wait()
    broker.stop()
    store.dispose()
    measured = json.loads((folder / "cp.json").read_text())
    waits = [(float(at), float(w)) for at, w in measured["assignment_waits"]]
    phases = {
        "before": phase_stats(waits, start, flood_at),
        "during": phase_stats(waits, flood_at, flood_end),
        "after": phase_stats(waits, flood_end, end),
    }
    doubted = [c for c in measured["health_changes"] if c[0] != FLOODER]
    results = {
        "machine": args.machine,
        "workers": args.workers,
        "arrivals_per_s": args.arrivals,
        "flood_rate_per_s": args.rate,
        "flood_seconds": args.seconds,
        "flood_kind": "useless heartbeats" if args.useless else "garbage",
        "budgeted": not args.unbudgeted,
        "flood_sent": sent["sent"],
        "flood_achieved_per_s": sent["sent"] / sent["seconds"],
        "phases": phases,
        "healthy_workers_doubted": len(doubted),
        "health_changes": measured["health_changes"],
        "refused": measured["refused"],
        "control_plane_max_rss_mib": measured["max_rss_mib"],
        "memory_sizes_at_end": measured["memory_sizes"],
        "at": datetime.now(UTC).isoformat(),
    }
    budget = "no budget" if args.unbudgeted else "per-worker budget"
    table = Table(title=f"one worker floods the control plane ({results['flood_kind']}, {budget})")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row(
        "flood sent (achieved rate)", f"{sent['sent']} ({results['flood_achieved_per_s']:.0f}/s)"
    )
    for name, phase in phases.items():
        table.add_row(
            f"assignment wait p50 / p99, {name} ({phase['jobs']} jobs)",
            f"{phase['p50_s']:.2f} / {phase['p99_s']:.2f} s",
        )
    table.add_row("healthy workers suspect or lost", str(len(doubted)))
    for reason, count in measured["refused"].items():
        if count:
            table.add_row(f"refused: {reason}", str(count))
    table.add_row("control plane peak memory", f"{measured['max_rss_mib']:.0f} MiB")
    console.print(table)
    kind = ("useless" if args.useless else "garbage") + ("-unbudgeted" if args.unbudgeted else "")
    console.print(f"wrote {write_result(f'worker_flood-{kind}', results)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=20)
    parser.add_argument("--arrivals", type=float, default=10.0, help="jobs a second")
    parser.add_argument("--job-seconds", type=float, default=1.0)
    parser.add_argument("--rate", type=int, default=10_000, help="flood messages a second")
    parser.add_argument("--seconds", type=float, default=10.0, help="of flood")
    parser.add_argument("--calm", type=float, default=10.0, help="seconds before and after")
    parser.add_argument("--useless", action="store_true", help="valid heartbeats, 20 outcomes")
    parser.add_argument("--unbudgeted", action="store_true", help="no per-worker budget")
    parser.add_argument("--machine", default="", help="what it ran on, for the record")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
