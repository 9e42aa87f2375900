"""Past one machine: three `framefleet serve` replicas on one PostgreSQL, NATS as the MQTT
broker (the second, clusterable implementation the worker protocol is held to), three worker
agents. The leader is SIGKILLed in the middle of the run: a standby takes over within the
lease time and one renewal; every job completes exactly once; no GPU ever held two jobs."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from framefleet.local_ports import free_port
from kernel.clock import SystemClock
from kernel.job_state import JobState
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head
from tests.support.local_services import Queues
from tests.support.nats_broker import LocalNats
from tests.support.renders import Buckets, video_job
from tests.support.waits import async_wait_until
from tests.worker_ami.system import LocalSystem, fleet
from worker_ami.agent.settings import WorkerSettings

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

LEASE_SECONDS = 3.0
REPLICAS = ("cp-1", "cp-2", "cp-3")


@pytest.fixture
def nats(tmp_path: Path) -> Iterator[LocalNats]:
    broker = LocalNats(tmp_path, free_port(), free_port())
    broker.start()
    yield broker
    broker.stop()


def replica_env(system: LocalSystem, database_url: str, replica: str) -> dict[str, str]:
    return {
        **os.environ,
        "FRAMEFLEET_ENDPOINT_URL": system.moto_endpoint,
        "FRAMEFLEET_JOBS_QUEUE_URL": system.queues.jobs_url,
        "FRAMEFLEET_DEAD_LETTER_QUEUE_URL": system.queues.dead_letter_url,
        "FRAMEFLEET_DATABASE_URL": database_url,
        "FRAMEFLEET_INTAKE__WAIT_SECONDS": "1",
        "FRAMEFLEET_MQTT__HOST": "127.0.0.1",
        "FRAMEFLEET_MQTT__PORT": str(system.broker.port),
        "FRAMEFLEET_CONTROL__TICK_SECONDS": "0.2",
        "FRAMEFLEET_CONTROL__LEASE_SECONDS": str(LEASE_SECONDS),
        "FRAMEFLEET_CONTROL__REPLICA_ID": replica,
        "FRAMEFLEET_CONTROL__SUSPECT_AFTER_SECONDS": "3",
        "FRAMEFLEET_CONTROL__LOST_AFTER_SECONDS": "8",
    }


def start_replica(system: LocalSystem, database_url: str, replica: str) -> subprocess.Popen[bytes]:
    with (system.tmp_path / f"{replica}.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "framefleet", "serve"],
            env=replica_env(system, database_url, replica),
            stdout=log,
            stderr=log,
        )


def no_gpu_held_two_jobs(store: JobStore, job_ids: list[str]) -> None:
    """From the attempts the store kept: on each (worker, GPU), attempts never overlap."""
    spans: dict[tuple[str | None, int | None], list[tuple[float, float, str]]] = {}
    for job_id in job_ids:
        for attempt in store.pages.attempts_facts(job_id):
            end = (attempt.ended_at or attempt.started_at).timestamp()
            key = (attempt.worker_id, attempt.gpu_index)
            spans.setdefault(key, []).append((attempt.started_at.timestamp(), end, job_id))
    for key, on_gpu in spans.items():
        on_gpu.sort()
        for (_, end, first), (start, _, second) in itertools.pairwise(on_gpu):
            assert start >= end, f"{key} held {first} and {second} at once"


@pytest.mark.end_to_end
async def test_the_leader_is_killed_and_a_standby_finishes_every_job_once(
    published_model: object,
    worker_settings: WorkerSettings,
    buckets: Buckets,
    sqs: SQSClient,
    queues: Queues,
    moto_endpoint: str,
    nats: LocalNats,
    tmp_path: Path,
    postgres_url: str,
) -> None:
    system = LocalSystem(
        worker_settings,
        buckets,
        sqs,
        queues,
        moto_endpoint,
        nats,
        tmp_path,
    )
    engine = make_engine(postgres_url)
    upgrade_to_head(engine)
    store = JobStore(engine, SystemClock())
    jobs = [video_job(system.buckets, f"failover-{i}", steps=40) for i in range(8)]
    system.submit(*jobs)
    ids = [job.job_id for job in jobs]
    replicas = {name: start_replica(system, postgres_url, name) for name in REPLICAS}
    try:
        async with fleet(system, database_url=postgres_url):

            def done() -> int:
                return sum(store.get(i).state is JobState.SUCCEEDED for i in ids if store.find(i))

            await async_wait_until(lambda: done() >= 2, 180, "two jobs done")
            holder = store.leases.lease_holder("control-plane")
            assert holder is not None
            leader, fence, _ = holder
            replicas[leader].send_signal(signal.SIGKILL)
            killed_at = time.monotonic()
            replicas[leader].wait(timeout=10)

            def taken_over() -> bool:
                now = store.leases.lease_holder("control-plane")
                return now is not None and now[0] != leader

            await async_wait_until(taken_over, 30, "a standby to lead")
            took = time.monotonic() - killed_at
            await async_wait_until(lambda: done() == len(ids), 240, "every job done")
        successor = store.leases.lease_holder("control-plane")
        assert successor is not None
        assert successor[1] > fence
        # Within the lease and one renewal (a third of it), and the store's round trips.
        print(f"leader {leader} killed; {successor[0]} led {took:.2f} s later")
        assert took <= LEASE_SECONDS * 4 / 3 + 1.0, took
        for job_id in ids:
            finished = [e for e in store.history(job_id) if e.to_state is JobState.SUCCEEDED]
            assert len(finished) == 1, job_id
        no_gpu_held_two_jobs(store, ids)
    finally:
        for process in replicas.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in replicas.values():
            process.wait(timeout=30)
        store.dispose()
