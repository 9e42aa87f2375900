"""Two autoscaler replicas (as `framefleet autoscaler run` builds them) against one store and
moto's EC2: only the holder of the buying lease buys, so the queue's capacity is bought once;
when the holder dies without a word, the other takes over and buys nothing twice."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import boto3

from autoscaler.ec2.ports import FLEET_TAG
from autoscaler.snapshot import Plan
from framefleet.autoscaler_cli import buying_lease, live_autoscaler
from framefleet.settings import AutoscalerConfig, ControlConfig, Settings
from kernel.clock import SystemClock
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head
from tests.support import async_wait_until, job_dict

FLEET = "lease-test"


def counted(
    once: Callable[[], Coroutine[Any, Any, list[Plan]]], rounds: dict[str, int], name: str
) -> Callable[[], Coroutine[Any, Any, list[Plan]]]:
    async def round_() -> list[Plan]:
        rounds[name] += 1
        return await once()

    return round_


async def test_one_replica_buys_and_a_successor_buys_nothing_twice(
    moto_endpoint: str, sqlite_url: str, tmp_path: Path
) -> None:
    engine = make_engine(sqlite_url)
    upgrade_to_head(engine)
    store = JobStore(engine, SystemClock())
    store.accept_batch(
        [Submission(parse_job(job_dict(f"lease-{i}", seed=i), now=None), f"m{i}") for i in range(2)]
    )
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_endpoint)
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]

    def settings(replica: str) -> Settings:
        return Settings(
            endpoint_url=moto_endpoint, database_url=sqlite_url,
            control=ControlConfig(lease_seconds=2, replica_id=replica),
            autoscaler=AutoscalerConfig(
                fleet_id=FLEET, launch_template="framefleet-lease-test", image_id=image,
                zones=["us-east-1a"], candidate_types=["g5.xlarge"], interval_seconds=0.2,
                advisor_url=(tmp_path / "offline.json").as_uri(),
            ),
        )  # fmt: skip

    def bought() -> int:
        found = ec2.describe_instances(Filters=[
            {"Name": f"tag:{FLEET_TAG}", "Values": [FLEET]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ])  # fmt: skip
        return sum(len(r["Instances"]) for r in found["Reservations"])

    clock = SystemClock()
    async with (
        live_autoscaler(settings("as-1"), clock) as first,
        live_autoscaler(settings("as-2"), clock) as second,
    ):
        stops = {"as-1": asyncio.Event(), "as-2": asyncio.Event()}
        tasks = {}
        rounds = {"as-1": 0, "as-2": 0}  # rounds each replica ran as the buyer
        for name, live in (("as-1", first), ("as-2", second)):
            live.loop.once = counted(live.loop.once, rounds, name)  # type: ignore[method-assign]
            lease = buying_lease(live, settings(name), clock)
            tasks[name] = asyncio.gather(lease.run(stops[name]),
                                         live.loop.run(stops[name], lease.leading))  # fmt: skip
        try:
            await async_wait_until(lambda: bought() >= 2, 60, "the queue's capacity")
            holder = store.lease_holder("autoscaler")
            assert holder is not None
            # Five rounds of the buyer later, still one instance per queued job.
            after = rounds[holder[0]] + 5
            await async_wait_until(lambda: rounds[holder[0]] >= after, 30, "five more rounds")
            assert bought() == 2
            assert (
                rounds[next(n for n in rounds if n != holder[0])] == 0
            )  # the standby bought nothing
            # The holder dies without releasing its lease; the other takes over.
            dead = holder[0]
            tasks[dead].cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await tasks[dead]
            await async_wait_until(
                lambda: (store.lease_holder("autoscaler") or ("",))[0] not in ("", dead),
                15,
                "the other replica to hold the buying lease",
            )
            successor = store.lease_holder("autoscaler")
            assert successor is not None
            assert successor[1] > holder[1]
            await async_wait_until(lambda: rounds[successor[0]] >= 5, 30, "its five rounds")
            assert bought() == 2
        finally:
            for name, stop in stops.items():
                stop.set()
                if not tasks[name].done():
                    await tasks[name]
    store.dispose()
