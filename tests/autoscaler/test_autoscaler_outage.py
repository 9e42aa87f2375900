"""The autoscaler as `framefleet autoscaler run` builds it, through an outage of AWS (issue 48):
with EC2 (and every AWS endpoint behind the same address) cut off, each connection reset or
held without an answer, its rounds keep failing with backoff, it reports not ready, and it
does not exit; jobs queued meanwhile get their instances once AWS answers, each bought once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import boto3
import pytest

from autoscaler.ec2.ports import FLEET_TAG
from framefleet.autoscaler_cli import LiveAutoscaler, live_autoscaler
from framefleet.health_server import HealthServer
from framefleet.local_ports import free_port
from framefleet.settings import AutoscalerConfig, Settings
from kernel.clock import SystemClock
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head
from tests.support.jobs import job_dict
from tests.support.tcp_proxy import Fault, TcpProxy, database_behind_proxy, proxy_before
from tests.support.waits import async_wait_until

ROUND = "a dependency of the autoscaler's round"


@pytest.fixture
async def aws(moto_endpoint: str) -> AsyncIterator[TcpProxy]:
    async with proxy_before(moto_endpoint) as proxy:
        yield proxy


@asynccontextmanager
async def rounds_running(settings: Settings) -> AsyncIterator[tuple[LiveAutoscaler, HealthServer]]:
    """`framefleet autoscaler run`'s loop, running; stopped (and alive till then) after."""
    stop = asyncio.Event()
    async with live_autoscaler(settings, SystemClock()) as live:
        assert live.health is not None
        rounds = asyncio.create_task(live.loop.run(stop))
        try:
            yield live, live.health
            assert not rounds.done()  # alive: it did not exit for the outage
        finally:
            stop.set()
            await asyncio.wait_for(rounds, timeout=60)


def settings_through(
    aws_url: str, moto_endpoint: str, database_url: str, tmp: Path, fleet: str
) -> Settings:
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_endpoint)
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    return Settings(
        endpoint_url=aws_url,
        database_url=database_url,
        autoscaler=AutoscalerConfig(
            fleet_id=fleet,
            launch_template="framefleet-outage-test",
            image_id=image,
            zones=["us-east-1a"],
            candidate_types=["g6e.xlarge"],
            advisor_url=(tmp / "no-feed-offline.json").as_uri(),  # the shipped snapshot
            interval_seconds=0.5,
            metrics_port=free_port(),
        ),
    )


def fleet_size(moto_endpoint: str, fleet: str) -> int:
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_endpoint)
    found = ec2.describe_instances(Filters=[{"Name": f"tag:{FLEET_TAG}", "Values": [fleet]}])
    return sum(len(r["Instances"]) for r in found["Reservations"])


async def ready(health: HealthServer, check: str) -> bool:
    return (await health.readiness())[check] == "ok"


async def out(health: HealthServer, check: str) -> bool:
    return not await ready(health, check)


@pytest.mark.parametrize(
    "fault", [Fault.CUT, Fault.RESET, Fault.BLACKHOLE, Fault.SLOW, Fault.ERRORS]
)
async def test_the_autoscaler_lives_through_an_aws_outage_and_buys_after(
    fault: Fault, aws: TcpProxy, moto_endpoint: str, sqlite_url: str, tmp_path: Path
) -> None:
    upgrade_to_head(make_engine(sqlite_url))
    fleet = f"outage-{uuid.uuid4().hex[:8]}"  # moto lives the whole session
    settings = settings_through(aws.url, moto_endpoint, sqlite_url, tmp_path, fleet)
    async with rounds_running(settings) as (live, health):
        await async_wait_until(lambda: ready(health, "ec2"), within=60, what="EC2 answers")
        aws.fail(fault)
        if fault is not Fault.SLOW:  # slow answers are answers: it buys through them
            await async_wait_until(lambda: out(health, "ec2"), within=60, what="cut off")
        queue(live.store, 2)
        if fault in (Fault.CUT, Fault.RESET, Fault.ERRORS):
            # Its rounds fail, and /readyz says which dependency is out.
            await async_wait_until(
                lambda: out(health, "dependencies"), within=90, what="the round's outage"
            )
            assert ROUND in (await health.readiness())["dependencies"]
        elif fault is Fault.BLACKHOLE:
            await async_wait_until(lambda: aws.failed >= 2, within=90, what="tries held")
        aws.fail(Fault.NONE)
        await async_wait_until(
            lambda: fleet_size(moto_endpoint, fleet) == 2, within=90, what="the instances"
        )
        await async_wait_until(
            lambda: ready(health, "dependencies"), within=90, what="the outage over"
        )
        assert fleet_size(moto_endpoint, fleet) == 2  # each bought once


@pytest.mark.parametrize("fault", [Fault.CUT, Fault.RESET, Fault.BLACKHOLE])
async def test_the_autoscaler_lives_through_a_database_outage_and_buys_after(
    fault: Fault, moto_endpoint: str, postgres_url: str, tmp_path: Path
) -> None:
    """PostgreSQL (the queue it buys for) cut off: the rounds fail and back off, the process
    lives, and the jobs queued meanwhile get their instances once it answers."""
    fleet = f"outage-{uuid.uuid4().hex[:8]}"  # moto lives the whole session
    upgrade_to_head(make_engine(postgres_url))
    with database_behind_proxy(postgres_url) as (database, proxied):
        settings = settings_through(moto_endpoint, moto_endpoint, proxied, tmp_path, fleet)
        async with rounds_running(settings) as (_, health):
            await async_wait_until(lambda: ready(health, "store"), within=60, what="answers")
            database.fail(fault)
            await async_wait_until(lambda: out(health, "store"), within=60, what="cut off")
            # Producers reach the database another way (the API of a replica beside it).
            store = JobStore(make_engine(postgres_url), SystemClock())
            try:
                queue(store, 2)
            finally:
                store.dispose()
            database.fail(Fault.NONE)
            await async_wait_until(
                lambda: fleet_size(moto_endpoint, fleet) == 2, within=90, what="the instances"
            )
            assert fleet_size(moto_endpoint, fleet) == 2  # each bought once


def queue(store: JobStore, count: int) -> None:
    store.intake.accept_batch(
        [
            Submission(parse_job(job_dict(f"queued-{i}", seed=i), now=None), f"m{i}")
            for i in range(count)
        ]
    )
