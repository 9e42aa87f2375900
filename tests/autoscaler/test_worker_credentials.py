"""Real per-worker broker authentication: the autoscaler gives each instance EC2 lists an
account of its own on the production broker (Mosquitto's dynamic-security plugin, started by
the broker image's entrypoint) and its password in SSM (moto) tagged with the instance's ARN;
a worker can then report only as itself, and the account goes with the instance."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aioboto3
import aiomqtt
import pytest

from autoscaler.credentials.dynsec import (
    CONTROL_PLANE,
    DynsecAccounts,
    control_plane_acls,
    worker_acls,
)
from autoscaler.credentials.issuer import WorkerCredentials
from autoscaler.credentials.ssm import INSTANCE_TAG, SsmCredentialDrop
from framefleet.local_ports import free_port
from kernel.clock import FakeClock
from kernel.mqtt_link import LinkSettings
from tests.support.dynsec_broker import BROKER_IMAGE, dynsec_broker
from tests.support.local_services import REGION

WORKER_A, WORKER_B = "i-0aaaaaaaaaaaaaaa1", "i-0bbbbbbbbbbbbbbb2"
CONTROL_PLANE_PASSWORD = "control-plane-secret"


@pytest.fixture
def admin(tmp_path: Path) -> Iterator[LinkSettings]:
    with dynsec_broker(tmp_path, free_port()) as settings:
        yield settings


@pytest.fixture
async def issuer(
    admin: LinkSettings, moto_endpoint: str, clock: FakeClock, tmp_path: Path
) -> AsyncIterator[WorkerCredentials]:
    session = aioboto3.Session(region_name=REGION)
    async with (
        session.client("ssm", endpoint_url=moto_endpoint) as ssm,
        session.client("sts", endpoint_url=moto_endpoint) as sts,
    ):
        drop = SsmCredentialDrop(ssm, sts, f"/framefleet-{tmp_path.name}/workers")
        yield WorkerCredentials(
            DynsecAccounts(admin), drop, clock, control_plane_password=CONTROL_PLANE_PASSWORD
        )


def client(admin: LinkSettings, username: str, password: str) -> aiomqtt.Client:
    return aiomqtt.Client(
        admin.host,
        admin.port,
        identifier=f"{username}-test",
        username=username,
        password=password,
        protocol=aiomqtt.ProtocolVersion.V311,
    )


async def refused(admin: LinkSettings, username: str, password: str) -> bool:
    try:
        async with client(admin, username, password):
            return False
    except aiomqtt.MqttCodeError:
        return True


async def test_each_worker_reports_as_itself_alone(
    issuer: WorkerCredentials, admin: LinkSettings, clock: FakeClock
) -> None:
    changes = await issuer.sync([WORKER_A, WORKER_B])
    assert set(changes.granted) == {WORKER_A, WORKER_B}
    assert changes.revoked == ()
    assert isinstance(issuer.drop, SsmCredentialDrop)
    password_a = await issuer.drop.read(WORKER_A)
    password_b = await issuer.drop.read(WORKER_B)
    assert password_a
    assert password_b
    assert password_a != password_b
    # The parameter carries the instance's ARN, which the workers' IAM condition matches.
    ssm = issuer.drop._ssm
    name = issuer.drop.name(WORKER_A)
    tags = await ssm.list_tags_for_resource(ResourceType="Parameter", ResourceId=name)
    (tag,) = [t for t in tags["TagList"] if t["Key"] == INSTANCE_TAG]
    assert tag["Value"] == f"arn:aws:ec2:{REGION}:123456789012:instance/{WORKER_A}"

    assert await refused(admin, WORKER_A, password_b)  # another's password
    assert await refused(admin, WORKER_A, "")
    assert await refused(admin, "i-0ccccccccccccccc3", password_a)  # no account at all
    async with (
        client(admin, CONTROL_PLANE, CONTROL_PLANE_PASSWORD) as control_plane,
        client(admin, WORKER_A, password_a) as worker_a,
    ):
        await control_plane.subscribe("ff/v1/workers/+/hello", qos=1)
        # A forged hello in B's name is dropped by the broker; A's own arrives.
        await worker_a.publish(f"ff/v1/workers/{WORKER_B}/hello", b"forged", qos=1)
        await worker_a.publish(f"ff/v1/workers/{WORKER_A}/hello", b"mine", qos=1)
        async with asyncio.timeout(10):
            message = await anext(aiter(control_plane.messages))
        assert (message.topic.value, message.payload) == (
            f"ff/v1/workers/{WORKER_A}/hello",
            b"mine",
        )
        # A may read its own commands, not B's.
        own = await worker_a.subscribe(f"ff/v1/workers/{WORKER_A}/cmd", qos=1)
        other = await worker_a.subscribe(f"ff/v1/workers/{WORKER_B}/cmd", qos=1)
        assert own != other
        assert [getattr(code, "value", code) for code in other] == [0x80]

    # Nothing changed: nothing to do.
    assert await issuer.sync([WORKER_A, WORKER_B]) == type(changes)()
    # B's instance is gone: its account and its parameter go with it, after the grace period.
    assert (await issuer.sync([WORKER_A])).revoked == ()
    clock.advance(issuer.grace.total_seconds())
    assert (await issuer.sync([WORKER_A])).revoked == (WORKER_B,)
    assert await refused(admin, WORKER_B, password_b)
    assert await issuer.drop.read(WORKER_B) is None
    assert not await refused(admin, WORKER_A, password_a)


async def test_a_grant_cut_short_is_finished_with_the_password_already_handed_out(
    issuer: WorkerCredentials, admin: LinkSettings
) -> None:
    """The autoscaler died after dropping the password, before the broker had the account:
    the instance may have read that password already, so the next round uses it."""
    await issuer.drop.write(WORKER_A, "dropped-before-the-crash")
    assert (await issuer.sync([WORKER_A])).granted == (WORKER_A,)
    assert await issuer.drop.read(WORKER_A) == "dropped-before-the-crash"
    assert not await refused(admin, WORKER_A, "dropped-before-the-crash")


async def test_the_admin_account_is_made_only_on_first_start(tmp_path: Path) -> None:
    """A restarted broker keeps its accounts (the file on EFS); the entrypoint does not need
    the admin password again, nor does it reset the one set."""
    port = free_port()
    with dynsec_broker(tmp_path, port) as admin:
        accounts = DynsecAccounts(admin)
        await accounts.apply({WORKER_A: "pw-a"}, [])
    with dynsec_broker(tmp_path, port) as admin:
        assert await DynsecAccounts(admin).accounts() == {WORKER_A}
        assert not await refused(admin, WORKER_A, "pw-a")


def acl_file_rules() -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(access, topic) of the control plane's user block and of the worker patterns."""
    control, worker = set(), set()
    section = None
    for line in (BROKER_IMAGE / "acl").read_text().splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "user":
            section = words[1]
        elif words[0] == "topic" and section == CONTROL_PLANE:
            control.add((words[1], words[2]))
        elif words[0] == "pattern":
            worker.add((words[1], words[2].replace("%u", WORKER_A)))
    return control, worker


def as_access(acls: list[dict[str, object]]) -> set[tuple[str, str]]:
    kind = {"publishClientSend": "write", "subscribePattern": "read"}
    return {(kind[str(a["acltype"])], str(a["topic"])) for a in acls if a["allow"] is True}


def test_the_broker_roles_are_the_acl_files_rules() -> None:
    """The dynamic-security roles grant what infra/mosquitto/acl grants, no more."""
    control, worker = acl_file_rules()
    assert as_access(control_plane_acls()) == control
    assert as_access(worker_acls(WORKER_A)) == worker
    assert json.dumps(worker_acls(WORKER_A)).count(WORKER_A) == 5
