"""The deploy rehearsal: `infra/examples/complete` applied to moto by Terraform, the product run
on exactly what it created, then `terraform destroy`.

The control plane and the autoscaler start from their ECS task definitions as read back from
the ECS API (tests/infra/ecs.py): command, environment and secrets, a read-only root with only
the task's volume writable, each in a network namespace of its own. The workers boot from the
launch template's user data (`framefleet fleet local --user-data`). One job goes in through the
Terraform queue and comes out as a video in the Terraform bucket; the autoscaler's launches land
in the Terraform subnets with the Terraform launch template; a spot warning through the
Terraform EventBridge rule and queue moves the job; the finance report goes out through the
Terraform SES identity. What stands in for AWS's managed parts: tests/infra/stand_ins.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from framefleet.local_ports import free_port
from kernel.clock import SystemClock
from kernel.job_state import JobState
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from tests.infra.checks import (
    a_scheduled_retirement_drains_the_instance,
    ecs_exec_has_its_volumes,
    launched_into_the_deployment,
    subscribe_to_notices,
    the_alerts_are_deployed,
    the_console_signs_people_on,
    the_first_token_opens_the_api,
    the_jobs_end_reaches_the_bus,
    the_report_reaches_finance,
)
from tests.infra.ecs import start_in_namespace, task_launch
from tests.infra.network import TaskNetwork
from tests.infra.stand_ins import (
    Certificates,
    PostgresTlsFront,
    broker,
    certificates,
    moto_server,
)
from tests.infra.tasks import JOB_ID, start_task, tail
from tests.infra.terraform_run import BROKER_DOMAIN, REGION, Deployment, clients, user_part
from tests.support.local_services import POSTGRES_ADMIN_URL
from tests.support.waits import wait_until
from worker_ami.agent.model_cache import publish_model
from worker_ami.agent.object_store import S3ObjectStore, s3_client
from worker_ami.agent.settings import WorkerSettings
from worker_ami.agent.tiny_model import build_tiny_wan

pytestmark = [pytest.mark.end_to_end, pytest.mark.postgres]
MODEL = "wan/tiny-rehearsal"


def platform_env(endpoint: str, ca_bundle: Path) -> dict[str, str]:
    """What the platform gives every process: the AWS endpoint (botocore's standard variable,
    here moto), credentials as a role would, the region as ECS sets it, and trust in the CA
    that signed the broker's certificate; nothing of this machine's FrameFleet settings."""
    kept = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FRAMEFLEET_", "AWS_", "MPL", "TMPDIR"))
        or k in ("FRAMEFLEET_AWS_ACTIONS_LOG",)
    }
    return kept | {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "rehearsal",
        "AWS_SECRET_ACCESS_KEY": "rehearsal",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "SSL_CERT_FILE": str(ca_bundle),
        "AWS_CA_BUNDLE": str(ca_bundle),
    }


@contextmanager
def database_for(password: str) -> Iterator[str]:
    """The RDS instance's database and master user, on the machine's PostgreSQL."""
    admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text("DROP DATABASE IF EXISTS framefleet WITH (FORCE)"))
        connection.execute(text("DROP ROLE IF EXISTS framefleet"))
        quoted = "'" + password.replace("'", "''") + "'"  # DDL takes no bound parameters
        connection.execute(text(f"CREATE ROLE framefleet LOGIN PASSWORD {quoted}"))
        connection.execute(text("CREATE DATABASE framefleet OWNER framefleet"))
    try:
        yield "postgresql+psycopg://framefleet@127.0.0.1:5432/framefleet"
    finally:
        with admin.connect() as connection:
            connection.execute(text("DROP DATABASE IF EXISTS framefleet WITH (FORCE)"))
            connection.execute(text("DROP ROLE IF EXISTS framefleet"))
        admin.dispose()


def publish_tiny_model(folder: Path, endpoint: str, bucket: str) -> None:
    """README step 6: the model published to the bucket and listed in its registry."""
    import asyncio

    uri = f"s3://{bucket}/models/tiny-rehearsal/"

    async def publish() -> None:
        model_dir = await asyncio.to_thread(build_tiny_wan, folder / "tiny-model")
        async with s3_client(WorkerSettings(endpoint_url=endpoint)) as client:
            store = S3ObjectStore(client)
            await publish_model(store, model_dir, uri, MODEL, "r1")
            registry = {"models": {MODEL: {"uri": uri, "revision": "r1"}}}
            await store.put(bucket, "models/registry.json", json.dumps(registry).encode())

    asyncio.run(publish())


def a_job(bucket: str) -> dict[str, Any]:
    return {
        "schema": "framefleet.job/v1",
        "job_id": JOB_ID,
        "model": MODEL,
        "prompt": "a lighthouse at dusk, waves",
        "width": 256,
        "height": 256,
        "num_frames": 17,
        "fps": 8,
        "steps": 160,
        "guidance": 5.0,
        "seed": 7,
        "output": f"s3://{bucket}/videos/rehearsal/",
        "tags": {"team": "research"},
    }


def test_the_example_deploys_runs_a_job_through_a_spot_warning_and_is_destroyed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    network = TaskNetwork()
    network.open()
    processes: list[tuple[str, subprocess.Popen[bytes], Path]] = []
    # One CA for every TLS endpoint here: AWS's (moto), the broker's load balancer, RDS's.
    certs = certificates(tmp_path, [BROKER_DOMAIN], [network.gateway])
    # This process, Terraform (Go reads SSL_CERT_FILE) and boto trust it.
    monkeypatch.setenv("SSL_CERT_FILE", str(certs.ca))
    monkeypatch.setenv("AWS_CA_BUNDLE", str(certs.ca))
    try:
        moto_log = tmp_path / "moto.log"
        with moto_server(network.gateway, free_port(), certs, moto_log) as endpoint:
            aws = clients(endpoint)
            deployment = Deployment(tmp_path / "tf", endpoint, user_part(aws))
            outputs = deployment.apply()
            with ExitStack() as stand_ins:  # the broker and the database, until the destroy
                rehearse(tmp_path, network, endpoint, aws, outputs, processes, stand_ins, certs)
                for _, process, _ in processes:
                    process.terminate()
                for _, process, _ in processes:
                    process.wait(timeout=30)
                processes.clear()
            deployment.destroy(aws, outputs["bucket"])
    except BaseException:
        for name, _, log in processes:
            print(f"--- {name} ---\n{tail(log)}", file=sys.stderr)
        raise
    finally:
        # SIGTERM first: the fleet runner ends its workers on it (a SIGKILL would leave them).
        for _, process, _ in processes:
            process.terminate()
        for _, process, _ in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        network.close()


def rehearse(
    tmp_path: Path,
    network: TaskNetwork,
    endpoint: str,
    aws: dict[str, Any],
    outputs: dict[str, Any],
    processes: list[tuple[str, subprocess.Popen[bytes], Path]],
    stack: ExitStack,
    certs: Certificates,
) -> None:
    secrets, gateway = aws["secretsmanager"], network.gateway
    launches = {
        family: task_launch(aws["ecs"], secrets, f"framefleet-{family}", family)
        for family in ("control-plane", "autoscaler")
    }
    ecs_exec_has_its_volumes(launches)
    the_console_signs_people_on(aws, launches["control-plane"])
    notices = subscribe_to_notices(aws, outputs)
    database = aws["rds"].describe_db_instances()["DBInstances"][0]
    database_host = database["Endpoint"]["Address"]
    assert (
        launches["control-plane"]
        .environment["FRAMEFLEET_DATABASE_URL"]
        .startswith(f"postgresql+psycopg://framefleet@{database_host}:5432/framefleet")
    )
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.0.1 localhost\n{gateway} {BROKER_DOMAIN}\n{gateway} {database_host}\n")
    password = launches["control-plane"].environment["FRAMEFLEET_DATABASE_PASSWORD"]
    local_database = stack.enter_context(database_for(password))
    stack.enter_context(PostgresTlsFront(gateway, 5432, certs, ("127.0.0.1", 5432)))
    admin = launches["autoscaler"].environment["FRAMEFLEET_AUTOSCALER__BROKER_ADMIN__PASSWORD"]
    (tmp_path / "broker").mkdir()
    stack.enter_context(broker(tmp_path / "broker", gateway, admin, certs))
    bucket = outputs["bucket"]
    publish_tiny_model(tmp_path, endpoint, bucket)

    platform = platform_env(endpoint, certs.ca)
    for launch in launches.values():
        start_task(tmp_path, network, hosts, launch, platform, processes)
    fleet = launches["autoscaler"].environment
    runner_env = platform | {
        "FRAMEFLEET_REGION": REGION,
        "FRAMEFLEET_AUTOSCALER__FLEET_ID": fleet["FRAMEFLEET_AUTOSCALER__FLEET_ID"],
        "FRAMEFLEET_AUTOSCALER__LAUNCH_TEMPLATE": fleet["FRAMEFLEET_AUTOSCALER__LAUNCH_TEMPLATE"],
        # A CPU stands in for each instance's GPUs; many instances share this machine.
        "FRAMEFLEET_WORKER_ALLOW_CPU": "true",
        "FRAMEFLEET_WORKER_DEVICE": "cpu",
        "FRAMEFLEET_WORKER_MIN_FREE_DISK_GIB": "0",
        "FRAMEFLEET_CREDENTIALS_WAIT_S": "120",
        # The user data's AWS calls have no product frame: name their role for the IAM check.
        "FRAMEFLEET_AWS_ROLE": "worker",
        "FRAMEFLEET_AWS_PLACE": "infra/modules/worker_fleet/user-data.sh.tftpl",
    }
    runner_log = tmp_path / "fleet.log"
    framefleet = str(Path(sys.executable).with_name("framefleet"))
    workdir = str(tmp_path / "fleet")
    runner_argv = [framefleet, "fleet", "local", "--user-data", "--workdir", workdir]
    runner = start_in_namespace(network.add(), hosts, runner_argv, runner_env, runner_log)
    processes.append(("fleet runner", runner, runner_log))

    # README step 7: the first job, into the Terraform queue.
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps(a_job(bucket)))
    producer = platform | {"FRAMEFLEET_JOBS_QUEUE_URL": outputs["jobs_queue_url"]}
    submitted = subprocess.run(
        [str(Path(sys.executable).with_name("framefleet")), "submit", "--file", str(job_file)],
        env=producer,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert submitted.returncode == 0, submitted.stderr

    store = JobStore(make_engine(local_database), SystemClock())
    try:
        follow_the_job(store, aws, outputs, processes)
        a_scheduled_retirement_drains_the_instance(store, aws)
    finally:
        store.dispose()
    launched_into_the_deployment(aws, outputs, fleet)
    the_jobs_end_reaches_the_bus(aws, notices, JOB_ID)
    assert any(
        o["Key"].startswith("videos/rehearsal/") and o["Key"].endswith(".mp4")
        for o in aws["s3"].list_objects_v2(Bucket=bucket, Prefix="videos/").get("Contents", [])
    )
    the_report_reaches_finance(tmp_path, network, hosts, launches["control-plane"], platform, aws)
    api = f"http://{network.address(0)}:8080"  # the first task started: the control plane's
    the_first_token_opens_the_api(
        tmp_path, network, hosts, launches["control-plane"], platform, aws, outputs, api
    )
    the_alerts_are_deployed(aws, outputs)


def follow_the_job(
    store: JobStore,
    aws: dict[str, Any],
    outputs: dict[str, Any],
    processes: list[tuple[str, subprocess.Popen[bytes], Path]],
) -> None:
    def record() -> Any:
        try:
            return store.get(JOB_ID)
        except Exception:  # not recorded yet (or the schema not yet migrated)
            return None

    def alive() -> None:
        for name, process, log in processes:
            assert process.poll() is None, f"{name} exited:\n{tail(log)}"

    def running() -> bool:
        alive()
        job = record()
        return job is not None and job.state is JobState.RUNNING and job.worker_id is not None

    wait_until(running, timeout=300, what="the job running on a launched worker")
    first = record().worker_id
    # EC2's two-minute notice, as EventBridge delivers it to the rule's queue.
    aws["events"].put_events(
        Entries=[
            {
                "Source": "aws.ec2",
                "DetailType": "EC2 Spot Instance Interruption Warning",
                "Detail": json.dumps({"instance-id": first, "instance-action": "terminate"}),
            }
        ]
    )

    def given_up() -> bool:
        alive()
        job = record()
        return job.attempt > 1 or (job.state is JobState.QUEUED and job.attempt == 1)

    wait_until(given_up, timeout=120, what="the warned worker to checkpoint and give the job up")
    aws["ec2"].terminate_instances(InstanceIds=[first])  # the market takes the instance

    def finished() -> bool:
        alive()
        return bool(record().state is JobState.SUCCEEDED)

    wait_until(finished, timeout=400, what="the job to finish on another worker")
    assert record().worker_id != first
