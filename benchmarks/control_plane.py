"""Control-plane throughput: simulated workers speaking the real protocol over a real Mosquitto
(no pipeline), against the real control-plane service and store.

    .venv/bin/python -m benchmarks.control_plane [--workers 1000] [--jobs 10000]

Reports scheduling decision time (p50, p99), assignments per second, jobs completed per second,
and the latency from a spot notice to the job's assignment on another worker (p50, p99).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import aiomqtt
import numpy as np
from rich.console import Console
from rich.table import Table

from benchmarks.common import free_port, write_result
from kernel.clock import SystemClock
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.mosquitto import LocalMosquitto
from kernel.mqtt_link import LinkSettings, MqttLink
from kernel.worker_protocol import (
    Channel,
    CommandKind,
    EventKind,
    GpuInfo,
    Heartbeat,
    Hello,
    WorkerEvent,
    decode_command,
    topic,
)
from orchestrator.control.refusals import RefusedMessages
from orchestrator.control.service import WORKER_TOPICS, ControlPlaneService
from orchestrator.control.settings import ControlSettings
from orchestrator.store.engine import make_engine
from orchestrator.store.instances import InstanceLedger
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head

NOW = datetime.now(UTC)


OUTPUT_PREFIX = "s3://bench/out/"


@dataclass
class Fleet:
    job_seconds: float
    busy: dict[str, tuple[str, int]] = field(default_factory=dict)  # worker -> (job, attempt)
    noticed: dict[str, float] = field(default_factory=dict)  # job -> notice time
    interrupted_workers: set[str] = field(default_factory=set)
    latencies: list[float] = field(default_factory=list)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)


def event(worker_id: str, kind: EventKind, **fields: object) -> str:
    return WorkerEvent(
        worker_id=worker_id,
        sent_at=datetime.now(UTC),
        event_id=f"e{random.getrandbits(64):x}",
        kind=kind,
        **fields,
    ).model_dump_json()


def preempted(worker_id: str, job_id: str, attempt: int) -> str:
    """The event a worker sends once its checkpoint is durable and it has stopped the job."""
    checkpoint = f"checkpoints/{job_id}/{attempt}/000003/manifest.json"
    return event(
        worker_id, EventKind.PREEMPTED, job_id=job_id, attempt=attempt, step=3,
        checkpoint=checkpoint,
    )  # fmt: skip


async def connection(
    port: int, worker_ids: list[str], fleet: Fleet, ready: asyncio.Event, stop: asyncio.Event
) -> None:
    async with aiomqtt.Client("127.0.0.1", port, identifier=f"sim-{worker_ids[0]}") as client:
        for worker_id in worker_ids:
            await client.subscribe(topic(worker_id, Channel.CMD), qos=1)
            hello = Hello(
                worker_id=worker_id,
                sent_at=datetime.now(UTC),
                instance_id=f"i-{abs(hash(worker_id)):017x}"[:19],
                instance_type="g6e.xlarge",
                availability_zone="us-east-1a",
                market="spot",
                gpus=(GpuInfo(index=0, family="l40s", vram_gib=48),),
                agent_version="sim",
            )
            await client.publish(
                topic(worker_id, Channel.HELLO), hello.model_dump_json(), qos=1, retain=True
            )
        ready.set()

        async def finish(worker_id: str, job_id: str, attempt: int) -> None:
            await asyncio.sleep(fleet.job_seconds)
            if fleet.busy.get(worker_id) != (job_id, attempt):
                return  # preempted meanwhile
            del fleet.busy[worker_id]
            await client.publish(
                topic(worker_id, Channel.EVENTS),
                event(
                    worker_id,
                    EventKind.FINISHED,
                    job_id=job_id,
                    attempt=attempt,
                    output=f"{OUTPUT_PREFIX}{job_id}.mp4",  # under the job's own prefix
                ),
                qos=1,
            )

        async def heartbeats() -> None:
            sequence = 0
            while not stop.is_set():
                sequence += 1
                for worker_id in worker_ids:
                    beat = Heartbeat(
                        worker_id=worker_id,
                        sent_at=datetime.now(UTC),
                        sequence=sequence,
                        accepting=worker_id not in fleet.interrupted_workers,
                    )
                    await client.publish(
                        topic(worker_id, Channel.HEARTBEAT), beat.model_dump_json(), qos=0
                    )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 5)

        beating = asyncio.create_task(heartbeats())
        async for message in client.messages:
            if stop.is_set():
                break
            command = decode_command(message.topic.value, bytes(message.payload))
            worker_id, job_id, attempt = (
                command.worker_id,
                command.job_id or "",
                command.attempt or 0,
            )
            if command.kind is CommandKind.ASSIGN:
                if fleet.busy.get(worker_id) == (job_id, attempt):
                    continue
                if worker_id in fleet.interrupted_workers:  # draining, as the real agent does
                    refusal = event(
                        worker_id,
                        EventKind.FAILED,
                        job_id=job_id,
                        attempt=attempt,
                        failure_kind="refused",
                        error="worker is draining",
                    )
                    await client.publish(topic(worker_id, Channel.EVENTS), refusal, qos=1)
                    continue
                if job_id in fleet.noticed and attempt > 1:
                    fleet.latencies.append(time.perf_counter() - fleet.noticed.pop(job_id))
                fleet.busy[worker_id] = (job_id, attempt)
                await client.publish(
                    topic(worker_id, Channel.EVENTS),
                    event(worker_id, EventKind.STARTED, job_id=job_id, attempt=attempt),
                    qos=1,
                )
                task = asyncio.create_task(finish(worker_id, job_id, attempt))
                fleet.tasks.add(task)
                task.add_done_callback(fleet.tasks.discard)
            elif command.kind is CommandKind.CHECKPOINT_NOW:
                if fleet.busy.pop(worker_id, None) is None:
                    continue
                await client.publish(
                    topic(worker_id, Channel.EVENTS), preempted(worker_id, job_id, attempt), qos=1
                )
        beating.cancel()


async def interrupt(port: int, fleet: Fleet, count: int, every: float, stop: asyncio.Event) -> None:
    async with aiomqtt.Client("127.0.0.1", port, identifier="sim-interrupter") as client:
        for _ in range(count):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)
            if stop.is_set():
                return
            candidates = [w for w in fleet.busy if w not in fleet.interrupted_workers]
            if not candidates:
                continue
            worker_id = random.choice(candidates)
            # Taken off the worker before any await, so `finish` cannot complete it meanwhile.
            job_id, attempt = fleet.busy.pop(worker_id)
            fleet.interrupted_workers.add(worker_id)
            fleet.noticed[job_id] = time.perf_counter()
            await client.publish(
                topic(worker_id, Channel.EVENTS),
                event(worker_id, EventKind.NOTICE_SEEN, notice="instance-action terminate"),
                qos=1,
            )
            # Like the real agent: checkpoint at once on the notice, then report `preempted`.
            await client.publish(
                topic(worker_id, Channel.EVENTS), preempted(worker_id, job_id, attempt), qos=1
            )


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q)) if values else float("nan")


async def run(
    workers: int,
    jobs: int,
    connections: int,
    job_seconds: float,
    interruptions: int,
    database: str | None,
) -> None:
    console = Console(width=140)
    folder = Path(tempfile.mkdtemp(prefix="framefleet-bench-cp-"))
    broker = LocalMosquitto(folder, free_port())
    broker.config.write_text(broker.config.read_text() + "max_queued_messages 100000\n")
    broker.start()
    engine = make_engine(database or f"sqlite:///{folder / 'cp.db'}")
    upgrade_to_head(engine)
    store = JobStore(engine, SystemClock())
    template = {
        "schema": "framefleet.job/v1",
        "model": "wan/bench",
        "prompt": "bench",
        "width": 64,
        "height": 64,
        "num_frames": 9,
        "steps": 10,
        "output": OUTPUT_PREFIX,
    }
    for start in range(0, jobs, 1000):
        store.accept_batch(
            [
                Submission(
                    parse_job(
                        {**template, "job_id": f"j{i:06d}", "seed": i, "priority": i % 10}, now=None
                    ),
                    f"m{i}",
                )
                for i in range(start, min(start + 1000, jobs))
            ]
        )
    console.print(f"{jobs} jobs queued; starting {workers} simulated workers")
    clock = SystemClock()
    link = LinkSettings(port=broker.port, client_id="bench-control-plane")
    service = ControlPlaneService(
        store,
        clock,
        ControlSettings(tick_seconds=0.2),
        connect=lambda deliver: MqttLink(link, WORKER_TOPICS, deliver, clock),
        refusals=RefusedMessages(clock),
        instances=InstanceLedger(store.engine, clock),
    )
    fleet = Fleet(job_seconds=job_seconds)
    stop = asyncio.Event()
    ids = [f"sim-{i:04d}" for i in range(workers)]
    groups = [ids[i::connections] for i in range(connections)]
    readies = [asyncio.Event() for _ in groups]
    sims = [
        asyncio.create_task(connection(broker.port, g, fleet, r, stop))
        for g, r in zip(groups, readies, strict=True)
    ]
    for ready in readies:
        await ready.wait()
    started = time.perf_counter()
    plane = asyncio.create_task(service.run(stop))
    expected = jobs * job_seconds / workers * 2 + 10
    interrupter = asyncio.create_task(
        interrupt(broker.port, fleet, interruptions, expected / (interruptions + 1), stop)
    )
    last_report = started
    while True:
        counts = await asyncio.to_thread(store.count_by_state)
        done = counts.get(JobState.SUCCEEDED, 0)
        if time.perf_counter() - last_report > 10:
            seconds = time.perf_counter() - started
            assigned = service.stats.assignments
            console.print(f"  {seconds:5.0f}s: {done} succeeded, {assigned} assignments")
            last_report = time.perf_counter()
        if done >= jobs:
            break
        await asyncio.sleep(0.5)
    elapsed = time.perf_counter() - started
    stop.set()
    interrupter.cancel()
    await asyncio.gather(plane, return_exceptions=True)
    for sim in sims:
        sim.cancel()
    await asyncio.gather(*sims, return_exceptions=True)
    broker.stop()
    store.dispose()

    decisions = list(service.stats.schedule_seconds)
    results = {
        "workers": workers,
        "jobs": jobs,
        "connections": connections,
        "job_seconds": job_seconds,
        "database": "postgresql" if database and "postgres" in database else "sqlite",
        "elapsed_s": elapsed,
        "assignments": service.stats.assignments,
        "assignments_per_s": service.stats.assignments / elapsed,
        "jobs_per_s": jobs / elapsed,
        "schedule_p50_ms": pct(decisions, 50) * 1000,
        "schedule_p99_ms": pct(decisions, 99) * 1000,
        "interruptions": len(fleet.latencies),
        "notice_to_reassigned_p50_s": pct(fleet.latencies, 50),
        "notice_to_reassigned_p99_s": pct(fleet.latencies, 99),
    }
    table = Table(
        title=f"control plane: {workers} simulated workers, {jobs} jobs, "
        f"{'PostgreSQL' if database and 'postgres' in database else 'SQLite'}, Mosquitto"
    )
    table.add_column("measure")
    table.add_column("value", justify="right")
    rows = [
        (
            "scheduling decision p50 / p99",
            f"{results['schedule_p50_ms']:.1f} / {results['schedule_p99_ms']:.1f} ms",
        ),
        ("assignments per second", f"{results['assignments_per_s']:.0f}"),
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
    console.print(f"wrote {write_result('control_plane', results)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--job-seconds", type=float, default=1.0)
    parser.add_argument("--interruptions", type=int, default=50)
    parser.add_argument("--database", help="database URL (default: a new SQLite file)")
    args = parser.parse_args()
    asyncio.run(
        run(
            args.workers,
            args.jobs,
            args.connections,
            args.job_seconds,
            args.interruptions,
            args.database,
        )
    )


if __name__ == "__main__":
    main()
