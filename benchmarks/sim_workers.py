"""Simulated workers for the control-plane benchmark, in a process of their own (so the
benchmark measures the control plane, not the simulation): the real protocol over MQTT, no
pipeline. Each job "runs" for `--job-seconds`; `--interruptions` spot notices come every
`--every` seconds. On SIGTERM it writes what it measured (notice -> running elsewhere) to
`--results` and exits.

    python -m benchmarks.sim_workers --port 1883 --workers 1000 --results sim.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import aiomqtt

from kernel.clock import stop_on_signals
from kernel.market import Market
from kernel.worker_protocol import (
    Channel,
    CommandKind,
    EventKind,
    FailureKind,
    GpuInfo,
    decode_command,
    topic,
)
from kernel.worker_side import Machine, Outgoing, WorkerSide

OUTPUT_PREFIX = "s3://bench/out/"


@dataclass
class Fleet:
    job_seconds: float
    busy: dict[str, tuple[str, int]] = field(default_factory=dict)  # worker -> (job, attempt)
    noticed: dict[str, float] = field(default_factory=dict)  # job -> notice time
    interrupted_workers: set[str] = field(default_factory=set)
    latencies: list[float] = field(default_factory=list)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    sides: dict[str, WorkerSide] = field(default_factory=dict)  # what each worker publishes

    def side(self, worker_id: str) -> WorkerSide:
        return self.sides.setdefault(worker_id, WorkerSide(worker_id))

    def event(self, worker_id: str, kind: EventKind, **fields: object) -> Outgoing:
        return self.side(worker_id).event(datetime.now(UTC), kind, **fields)[1]

    def preempted(self, worker_id: str, job_id: str, attempt: int) -> Outgoing:
        """The event a worker sends once its checkpoint is durable and it stopped the job."""
        checkpoint = f"checkpoints/{job_id}/{attempt}/000003/manifest.json"
        return self.event(
            worker_id,
            EventKind.PREEMPTED,
            job_id=job_id,
            attempt=attempt,
            step=3,
            checkpoint=checkpoint,
        )


async def publish(client: aiomqtt.Client, message: Outgoing, qos: int = 1) -> None:
    await client.publish(message.topic, message.payload, qos=qos, retain=message.retain)


async def connection(
    port: int, worker_ids: list[str], fleet: Fleet, ready: asyncio.Event, stop: asyncio.Event
) -> None:
    async with aiomqtt.Client("127.0.0.1", port, identifier=f"sim-{worker_ids[0]}") as client:
        for worker_id in worker_ids:
            await client.subscribe(topic(worker_id, Channel.CMD), qos=1)
            gpus = (GpuInfo(index=0, family="l40s", vram_gib=48),)
            machine = Machine(worker_id, "g6e.xlarge", "us-east-1a", Market.SPOT, gpus, "sim")
            await publish(client, fleet.side(worker_id).hello(datetime.now(UTC), machine))
        ready.set()

        async def finish(worker_id: str, job_id: str, attempt: int) -> None:
            await asyncio.sleep(fleet.job_seconds)
            if fleet.busy.get(worker_id) != (job_id, attempt):
                return  # preempted meanwhile
            del fleet.busy[worker_id]
            finished = fleet.event(
                worker_id,
                EventKind.FINISHED,
                job_id=job_id,
                attempt=attempt,
                output=f"{OUTPUT_PREFIX}{job_id}.mp4",  # under the job's own prefix
            )
            await publish(client, finished)

        async def heartbeats() -> None:
            while not stop.is_set():
                for worker_id in worker_ids:
                    accepting = worker_id not in fleet.interrupted_workers
                    beat = fleet.side(worker_id).heartbeat(datetime.now(UTC), accepting=accepting)
                    await publish(client, beat, qos=0)
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
                    refusal = fleet.event(
                        worker_id,
                        EventKind.FAILED,
                        job_id=job_id,
                        attempt=attempt,
                        failure_kind=FailureKind.REFUSED,
                        error="worker is draining",
                    )
                    await publish(client, refusal)
                    continue
                if job_id in fleet.noticed and attempt > 1:
                    fleet.latencies.append(time.perf_counter() - fleet.noticed.pop(job_id))
                fleet.busy[worker_id] = (job_id, attempt)
                started = fleet.event(worker_id, EventKind.STARTED, job_id=job_id, attempt=attempt)
                await publish(client, started)
                task = asyncio.create_task(finish(worker_id, job_id, attempt))
                fleet.tasks.add(task)
                task.add_done_callback(fleet.tasks.discard)
            elif command.kind is CommandKind.CHECKPOINT_NOW:
                if fleet.busy.pop(worker_id, None) is None:
                    continue
                await publish(client, fleet.preempted(worker_id, job_id, attempt))
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
            notice = "instance-action terminate"
            await publish(client, fleet.event(worker_id, EventKind.NOTICE_SEEN, notice=notice))
            # Like the real agent: checkpoint at once on the notice, then report `preempted`.
            await publish(client, fleet.preempted(worker_id, job_id, attempt))


async def serve(args: argparse.Namespace) -> list[float]:
    fleet = Fleet(job_seconds=args.job_seconds)
    stop = stop_on_signals()
    # Named by instance id, as on EC2 (a worker is its instance; see orchestrator.control.identity).
    ids = [f"i-{args.first_id + i:017x}" for i in range(args.workers)]
    groups = [ids[i :: args.connections] for i in range(args.connections)]
    readies = [asyncio.Event() for _ in groups]
    sims = [
        asyncio.create_task(connection(args.port, g, fleet, r, stop))
        for g, r in zip(groups, readies, strict=True)
    ]
    for ready in readies:
        await ready.wait()
    print("ready", flush=True)  # the benchmark starts its clock on this line
    interrupter = asyncio.create_task(
        interrupt(args.port, fleet, args.interruptions, args.every, stop)
    )
    await stop.wait()
    interrupter.cancel()
    for sim in sims:
        sim.cancel()
    await asyncio.gather(interrupter, *sims, return_exceptions=True)
    return fleet.latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--job-seconds", type=float, default=10.0)
    parser.add_argument("--interruptions", type=int, default=50)
    parser.add_argument("--every", type=float, default=2.0)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--first-id", type=int, default=1, help="the first worker's number")
    args = parser.parse_args()
    latencies = asyncio.run(serve(args))
    args.results.write_text(json.dumps({"notice_to_running_s": latencies}))
    sys.exit(0)


if __name__ == "__main__":
    main()
