"""The workers' user data, run against a scratch root as on a new instance: it asks IMDSv2 (the
emulator) for its instance id, waits for the password the autoscaler drops for that instance
(issued here while the script waits, as after a launch), writes the settings the agent reads,
and `framefleet-worker serve` started from them says hello on the production broker (its
dynamic-security plugin) to the control plane's account, as the instance itself."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aioboto3
import aiomqtt
import boto3
import pytest

from autoscaler.credentials.dynsec import CONTROL_PLANE, DynsecAccounts
from autoscaler.credentials.issuer import WorkerCredentials
from autoscaler.credentials.ssm import SsmCredentialDrop
from framefleet.local_ports import free_port
from kernel.clock import FakeClock, SystemClock
from tests.support.dynsec_broker import dynsec_broker
from tests.support.local_services import REGION
from tests.support.paths import INFRA
from tests.support.terraform_support import templatefile
from worker_ami.agent.imds_emulator import ImdsEmulator, InstanceIdentity

USER_DATA = INFRA / "modules" / "worker_fleet" / "user-data.sh.tftpl"
INSTANCE_ID = "i-0f1e2d3c4b5a69788"


@pytest.fixture
async def imds_url() -> AsyncIterator[str]:
    emulator = ImdsEmulator(SystemClock(), InstanceIdentity(instance_id=INSTANCE_ID))
    url = await emulator.start()
    yield url
    await emulator.stop()


async def test_the_user_data_writes_the_agents_settings_and_the_agent_starts(
    tmp_path: Path, moto_endpoint: str, imds_url: str
) -> None:
    suffix = uuid.uuid4().hex[:8]
    bucket, path = f"fleet-{suffix}", f"/framefleet-{suffix}/workers"
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=moto_endpoint)
    s3.create_bucket(Bucket=bucket)
    registry: dict[str, dict[str, str]] = {"models": {}}
    s3.put_object(Bucket=bucket, Key="models/registry.json", Body=json.dumps(registry).encode())
    port = free_port()
    script = tmp_path / "user-data.sh"
    # Rendered by Terraform's own templatefile, as the launch template is.
    script.write_text(
        templatefile(
            USER_DATA,
            {
                "region": REGION,
                "broker_host": "127.0.0.1",
                "broker_port": str(port),
                "broker_tls": "false",
                "credentials_path": path,
                "checkpoint_bucket": bucket,
                "model_registry": f"s3://{bucket}/models/registry.json",
                "warm_models": "",
                "max_checkpoint_interval": "600",
                "metrics_port": "9400",
                "jobs_per_gpu": "2",
                "mig_slots": "true",
            },
        )
    )
    root = tmp_path / "root"
    env = {
        **os.environ,
        "FRAMEFLEET_ROOT": str(root),
        "FRAMEFLEET_PYTHON": sys.executable,
        "FRAMEFLEET_SYSTEMCTL": "true",
        "FRAMEFLEET_GROUP": str(os.getgid()),
        "AWS_ENDPOINT_URL": moto_endpoint,
        "FRAMEFLEET_AWS_ROLE": "worker",
        "FRAMEFLEET_AWS_PLACE": str(USER_DATA.relative_to(INFRA.parent)),
        "FRAMEFLEET_IMDS_URL": imds_url,
        "FRAMEFLEET_CREDENTIALS_WAIT_S": "60",
    }
    session = aioboto3.Session(region_name=REGION)
    with dynsec_broker(tmp_path, port) as admin:
        async with (
            session.client("ssm", endpoint_url=moto_endpoint) as ssm,
            session.client("sts", endpoint_url=moto_endpoint) as sts,
        ):
            drop = SsmCredentialDrop(ssm, sts, path)
            issuer = WorkerCredentials(
                DynsecAccounts(admin), drop, FakeClock(), control_plane_password="cp-secret"
            )
            user_data = await asyncio.create_subprocess_exec(
                "bash", str(script), env=env, stderr=asyncio.subprocess.PIPE
            )
            # The autoscaler issues the account once its launch returns; the instance waits.
            assert (await issuer.sync([INSTANCE_ID])).granted == (INSTANCE_ID,)
            async with asyncio.timeout(120):
                _, errors = await user_data.communicate()
            assert user_data.returncode == 0, errors.decode()
            password = await drop.read(INSTANCE_ID)
        settings_file = root / "etc" / "framefleet" / "worker.env"
        assert oct(settings_file.stat().st_mode & 0o777) == "0o640"
        assert json.loads((root / "etc" / "framefleet" / "models.json").read_text()) == registry
        written = dict(line.split("=", 1) for line in settings_file.read_text().splitlines())
        assert written["FRAMEFLEET_WORKER_MQTT_USERNAME"] == INSTANCE_ID
        assert written["FRAMEFLEET_WORKER_MQTT_PASSWORD"] == password
        assert password is not None
        assert password not in script.read_text()  # fetched, never templated
        assert written["FRAMEFLEET_WORKER_CHECKPOINT_BUCKET"] == bucket
        # Where the registry came from: a model added later is read from there, no restart.
        assert written["FRAMEFLEET_WORKER_MODEL_REGISTRY_URI"].startswith(f"s3://{bucket}/")
        assert (
            written["FRAMEFLEET_WORKER_JOBS_PER_GPU"],
            written["FRAMEFLEET_WORKER_MIG_SLOTS"],
        ) == (
            "2",
            "true",
        )
        agent_env = {
            **os.environ,
            **written,
            "FRAMEFLEET_WORKER_MODEL_REGISTRY": str(root / "etc" / "framefleet" / "models.json"),
        }
        # The agent itself, from exactly these settings, plus what only a test machine needs.
        agent_env |= {
            "FRAMEFLEET_WORKER_ENDPOINT_URL": moto_endpoint,
            "FRAMEFLEET_WORKER_IMDS_URL": imds_url,
            "FRAMEFLEET_WORKER_ALLOW_CPU": "true",
            "FRAMEFLEET_WORKER_CACHE_DIR": str(tmp_path / "cache"),
        }
        async with aiomqtt.Client(
            "127.0.0.1", port, username=CONTROL_PLANE, password="cp-secret"
        ) as control_plane:
            await control_plane.subscribe("ff/v1/workers/+/hello", qos=1)
            agent = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "framefleet.worker_cli",
                "serve",
                env=agent_env,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
            try:
                async with asyncio.timeout(60):
                    message = await anext(aiter(control_plane.messages))
                hello = json.loads(bytes(message.payload))
                assert message.topic.value == f"ff/v1/workers/{INSTANCE_ID}/hello"
                assert hello["type"] == "hello"
                assert hello["worker_id"] == INSTANCE_ID
            finally:
                agent.terminate()
                await agent.wait()
