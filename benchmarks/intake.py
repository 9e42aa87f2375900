"""Intake throughput: jobs/s into SQLite and PostgreSQL next to the raw SQS receive+delete rate
of the same moto server, measured in the same run.

    .venv/bin/python -m benchmarks.intake [--messages 10000] [--concurrency 4]

The store must not be the bottleneck: ingest rate >= 80% of the raw rate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

import aioboto3
from prometheus_client import CollectorRegistry
from rich.console import Console
from rich.table import Table
from sqlalchemy import create_engine, text

from benchmarks.common import moto_server_process, write_result
from framefleet.control_plane import boto_config, build_intake, build_store
from framefleet.settings import IntakeConfig, Settings
from kernel.clock import SystemClock
from orchestrator.intake.metrics import IntakeMetrics

if TYPE_CHECKING:
    from types_aiobotocore_sqs import SQSClient

POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def job_body(index: int, run: str) -> str:
    return json.dumps(
        {
            "schema": "framefleet.job/v1",
            "job_id": f"bench-{run}-{index:06d}",
            "model": "wan/wan2.1-t2v-1.3b",
            "prompt": f"benchmark clip number {index}",
            "width": 832,
            "height": 480,
            "num_frames": 81,
            "steps": 30,
            "seed": index,
            "output": "s3://bench-output/clips/",
            "tags": {"team": "bench"},
        }
    )


async def produce(
    sqs: SQSClient, url: str, count: int, run: str, consumed: Callable[[], int], backlog: int
) -> None:
    """Send `count` jobs in batches of 10, keeping at most `backlog` unconsumed: moto's SQS
    spends time proportional to the queue depth on every call, unlike real SQS."""
    for base in range(0, count, 10):
        while base - consumed() > backlog:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        entries = [
            {"Id": str(i), "MessageBody": job_body(i, run)}
            for i in range(base, min(base + 10, count))
        ]
        await sqs.send_message_batch(QueueUrl=url, Entries=entries)  # type: ignore[arg-type]


async def raw_drain(sqs: SQSClient, url: str, count: int, concurrency: int, backlog: int) -> float:
    seen: set[str] = set()
    started = time.perf_counter()
    producer = asyncio.create_task(produce(sqs, url, count, "raw", lambda: len(seen), backlog))

    async def poll() -> None:
        while len(seen) < count:
            response = await sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1, VisibilityTimeout=60
            )
            messages = response.get("Messages", [])
            if messages:
                await sqs.delete_message_batch(
                    QueueUrl=url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                        for i, m in enumerate(messages)
                    ],
                )
                # Count distinct ids: moto can hand one message to two concurrent receivers.
                seen.update(m["MessageId"] for m in messages)

    await asyncio.gather(*(poll() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    await producer
    return count / elapsed


async def intake_drain(
    sqs: SQSClient, settings: Settings, count: int, phase: str, backlog: int
) -> tuple[float, int, int]:
    clock = SystemClock()
    store = build_store(settings, clock)
    metrics = IntakeMetrics(CollectorRegistry())
    intake = build_intake(sqs, settings, store.intake, clock, metrics)
    stop = asyncio.Event()
    started = time.perf_counter()
    task = asyncio.create_task(intake.run(stop))
    url = settings.require_queues()[0]
    producer = asyncio.create_task(
        produce(sqs, url, count, phase, lambda: metrics.outcome("accepted"), backlog)
    )
    while metrics.outcome("accepted") < count:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    elapsed = time.perf_counter() - started
    stop.set()
    await asyncio.gather(task, producer)
    stored = store.count_jobs()
    store.dispose()
    return count / elapsed, stored, metrics.outcome("duplicate")


async def run(messages: int, concurrency: int, backlog: int) -> dict[str, object]:
    console = Console()
    results: dict[str, object] = {
        "messages": messages,
        "concurrency": concurrency,
        "producer_backlog": backlog,
    }
    pg_schema = f"bench_{uuid.uuid4().hex[:8]}"
    sqlite_dir = tempfile.mkdtemp(prefix="framefleet-bench-")
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{pg_schema}"'))
    try:
        with moto_server_process() as endpoint:
            session = aioboto3.Session(region_name="us-east-1")
            async with session.client("sqs", endpoint_url=endpoint, config=boto_config()) as sqs:
                rates: dict[str, float] = {}
                for phase in ("raw", "sqlite", "postgres"):
                    url = (await sqs.create_queue(QueueName=f"bench-{phase}"))["QueueUrl"]
                    dlq = (await sqs.create_queue(QueueName=f"bench-{phase}-dlq"))["QueueUrl"]
                    if phase == "raw":
                        rates[phase] = await raw_drain(sqs, url, messages, concurrency, backlog)
                        console.print(f"{phase}: {rates[phase]:.0f} messages/s")
                        continue
                    database_url = (
                        f"sqlite:///{sqlite_dir}/intake.db"
                        if phase == "sqlite"
                        else f"{POSTGRES_URL}?options=-csearch_path%3D{pg_schema}"
                    )
                    settings = Settings(
                        endpoint_url=endpoint,
                        jobs_queue_url=url,
                        dead_letter_queue_url=dlq,
                        database_url=database_url,
                        intake=IntakeConfig(concurrency=concurrency, wait_seconds=1),
                    )
                    rate, stored, duplicates = await intake_drain(
                        sqs, settings, messages, phase, backlog
                    )
                    console.print(f"{phase}: {rate:.0f} jobs/s")
                    results[f"{phase}_duplicate_deliveries"] = duplicates
                    if stored != messages:
                        raise SystemExit(f"{phase}: stored {stored} jobs, expected {messages}")
                    rates[phase] = rate
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{pg_schema}" CASCADE'))
        admin.dispose()

    table = Table(
        title=f"intake: {messages} jobs, {concurrency} pollers, moto server, backlog <= {backlog}"
    )
    for column in ("path", "messages/s", "share of raw SQS rate"):
        table.add_column(column, justify="right")
    for phase, label in (
        ("raw", "raw receive+delete"),
        ("sqlite", "intake -> SQLite"),
        ("postgres", "intake -> PostgreSQL"),
    ):
        share = rates[phase] / rates["raw"]
        table.add_row(label, f"{rates[phase]:.0f}", f"{share:.0%}")
    console.print(table)
    results["rates_per_second"] = rates
    results["share_of_raw"] = {k: rates[k] / rates["raw"] for k in ("sqlite", "postgres")}
    path = write_result("intake", results)
    console.print(f"wrote {path}")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--backlog", type=int, default=200, help="most unconsumed messages")
    args = parser.parse_args()
    asyncio.run(run(args.messages, args.concurrency, args.backlog))


if __name__ == "__main__":
    main()
