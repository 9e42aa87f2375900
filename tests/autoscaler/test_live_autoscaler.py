"""One round of the live autoscaler as `framefleet autoscaler run` builds it: aioboto3 against
the moto server, the control plane's database, the shipped advisor and the dated price table,
and the production broker, on which each instance it buys gets an account of its own."""

from __future__ import annotations

from pathlib import Path

import boto3

from autoscaler.credentials.dynsec import DynsecAccounts
from autoscaler.ec2.ports import FLEET_TAG, MARKET_TAG
from framefleet.autoscaler_cli import live_autoscaler
from framefleet.local_ports import free_port
from framefleet.settings import AutoscalerConfig, BrokerAdminConfig, Settings
from kernel.clock import SystemClock
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head
from tests.support.dynsec_broker import ADMIN_PASSWORD, dynsec_broker
from tests.support.jobs import job_dict


async def test_one_round_buys_tagged_spot_capacity_for_the_queue(
    moto_endpoint: str, sqlite_url: str, tmp_path: Path
) -> None:
    engine = make_engine(sqlite_url)
    upgrade_to_head(engine)
    store = JobStore(engine, SystemClock())
    store.intake.accept_batch(
        [Submission(parse_job(job_dict(f"live-{i}", seed=i), now=None), f"m{i}") for i in range(2)]
    )
    store.dispose()
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_endpoint)
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    port = free_port()
    admin = BrokerAdminConfig(host="127.0.0.1", port=port, password=ADMIN_PASSWORD, tls=False)
    settings = Settings(
        endpoint_url=moto_endpoint,
        database_url=sqlite_url,
        autoscaler=AutoscalerConfig(
            fleet_id="live-test",
            launch_template="framefleet-live-test",
            image_id=image,
            zones=["us-east-1a", "us-east-1b"],
            candidate_types=["g6e.xlarge", "g5.xlarge"],
            advisor_url=(tmp_path / "no-feed-offline.json").as_uri(),  # the shipped snapshot
            broker_admin=admin,
            worker_credentials_path="/live-test/workers",
        ),
    )
    with dynsec_broker(tmp_path, port) as admin_link:
        async with live_autoscaler(settings, SystemClock()) as live:
            plans = await live.loop.once()
            again = await live.loop.once()
        accounts = await DynsecAccounts(admin_link).accounts()
    assert len(plans[0].launches) == 2
    assert all(launch.pool.market.value == "spot" for launch in plans[0].launches)
    assert again[0].launches == ()  # the new capacity is counted, nothing bought twice
    found = ec2.describe_instances(Filters=[{"Name": f"tag:{FLEET_TAG}", "Values": ["live-test"]}])[
        "Reservations"
    ]
    instances = [i for r in found for i in r["Instances"]]
    assert len(instances) == 2
    assert all({"Key": MARKET_TAG, "Value": "spot"} in i["Tags"] for i in instances)
    # Each instance holds a broker account of its own, its password in SSM for it alone.
    assert accounts == {i["InstanceId"] for i in instances}
    ssm = boto3.client("ssm", region_name="us-east-1", endpoint_url=moto_endpoint)
    for instance in instances:
        name = f"/live-test/workers/{instance['InstanceId']}"
        assert ssm.get_parameter(Name=name)["Parameter"]["Type"] == "SecureString"
