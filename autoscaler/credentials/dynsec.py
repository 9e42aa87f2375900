"""Worker accounts in Mosquitto's dynamic-security plugin, over its control topic (thin).

Each worker gets a client named by its instance id and a role of its own that allows exactly
what `infra/mosquitto/acl` allows a worker: publish its hello, heartbeat, events and status,
subscribe to its commands. (Mosquitto 2.0's plugin has no `%u` patterns, so the role names
the worker's topics.) The admin account is the one `mosquitto_ctrl dynsec init` made, which
the broker's entrypoint (`infra/mosquitto/entrypoint.sh`) gives the autoscaler; with it the
autoscaler also keeps the control plane's account (an admin could make any account anyway)."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Collection, Mapping
from typing import Any

import aiomqtt

from autoscaler.credentials.ports import CredentialError
from kernel.instance_types import INSTANCE_ID_PATTERN
from kernel.mqtt_link import LinkSettings, tls_context
from kernel.outside_text import printable
from kernel.worker_protocol import TOPIC_PREFIX, WORKER_PUBLISHES, Channel, topic

CONTROL = "$CONTROL/dynamic-security/v1"
ROLE_PREFIX = "framefleet-worker-"
CONTROL_PLANE = "framefleet-control-plane"
# Only instance ids are worker accounts; the admin's and the control plane's are left alone.
WORKER_ACCOUNT = re.compile(INSTANCE_ID_PATTERN)
# Errors that mean the wanted state is already there (a grant or revoke repeated).
SETTLED = ("already exists", "not found")


def worker_acls(worker_id: str) -> list[dict[str, Any]]:
    """The worker's own topics, as dynamic-security ACLs (everything else is denied)."""
    acls: list[dict[str, Any]] = [
        {"acltype": "publishClientSend", "topic": topic(worker_id, c), "allow": True}
        for c in WORKER_PUBLISHES
    ]
    acls.append(
        {"acltype": "subscribePattern", "topic": topic(worker_id, Channel.CMD), "allow": True}
    )
    return acls


def control_plane_acls() -> list[dict[str, Any]]:
    """Every worker's hello, heartbeat, events and status; every worker's commands."""
    every = f"{TOPIC_PREFIX}/+"
    acls: list[dict[str, Any]] = [
        {"acltype": "subscribePattern", "topic": f"{every}/{c.value}", "allow": True}
        for c in WORKER_PUBLISHES
    ]
    acls.append(
        {"acltype": "publishClientSend", "topic": f"{every}/{Channel.CMD.value}", "allow": True}
    )
    return acls


def account_commands(
    username: str, role: str, acls: list[dict[str, Any]], password: str
) -> list[dict[str, Any]]:
    """Role, client, password: each repeatable (a command that finds its work done fails
    with an error `apply` takes as settled)."""
    return [
        {"command": "createRole", "rolename": role, "acls": acls},
        {
            "command": "createClient",
            "username": username,
            "password": password,
            "roles": [{"rolename": role}],
        },
        # A client left by a grant cut short, or a rotated password, gets this one.
        {"command": "setClientPassword", "username": username, "password": password},
    ]


def grant_commands(worker_id: str, password: str) -> list[dict[str, Any]]:
    return account_commands(worker_id, ROLE_PREFIX + worker_id, worker_acls(worker_id), password)


def revoke_commands(worker_id: str) -> list[dict[str, Any]]:
    return [
        {"command": "deleteClient", "username": worker_id},
        {"command": "deleteRole", "rolename": ROLE_PREFIX + worker_id},
    ]


class DynsecAccounts:
    def __init__(self, settings: LinkSettings, timeout_s: float = 10.0, batch: int = 100) -> None:
        self._settings, self._timeout, self._batch = settings, timeout_s, batch

    async def accounts(self) -> set[str]:
        (answer,) = await self._send([{"command": "listClients", "count": -1, "offset": 0}])
        names = answer.get("data", {}).get("clients", [])
        return {n for n in names if isinstance(n, str) and WORKER_ACCOUNT.match(n)}

    async def ensure_control_plane(self, password: str) -> None:
        await self._run(
            account_commands(CONTROL_PLANE, CONTROL_PLANE, control_plane_acls(), password)
        )

    async def apply(self, grant: Mapping[str, str], revoke: Collection[str]) -> None:
        commands: list[dict[str, Any]] = []
        for worker_id, password in grant.items():
            _check(worker_id)
            commands += grant_commands(worker_id, password)
        for worker_id in revoke:
            _check(worker_id)
            commands += revoke_commands(worker_id)
        await self._run(commands)

    async def _run(self, commands: list[dict[str, Any]]) -> None:
        for start in range(0, len(commands), self._batch):
            answers = await self._send(commands[start : start + self._batch])
            for answer in answers:
                error = answer.get("error")
                if error and not any(s in str(error).lower() for s in SETTLED):
                    what = printable(f"{answer.get('command')}: {error}", 200)
                    raise CredentialError(f"broker refused {what}")

    async def _send(self, commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One request on the control topic and its response, matched by correlation data."""
        settings = self._settings
        correlation = uuid.uuid4().hex
        for command in commands:
            command["correlationData"] = correlation
        try:
            async with (
                asyncio.timeout(self._timeout),
                aiomqtt.Client(
                    settings.host,
                    settings.port,
                    identifier=settings.client_id,
                    username=settings.username,
                    password=settings.password,
                    tls_context=tls_context(settings),
                    protocol=aiomqtt.ProtocolVersion.V311,
                ) as client,
            ):
                await client.subscribe(f"{CONTROL}/response", qos=1)
                await client.publish(CONTROL, json.dumps({"commands": commands}), qos=1)
                async for message in client.messages:
                    answers = _answers(message.payload, correlation)
                    if answers is not None:
                        return answers
        except (aiomqtt.MqttError, TimeoutError) as error:
            raise CredentialError(f"broker admin request failed: {error!r}") from None
        raise CredentialError("broker admin connection closed before its answer")


def _answers(payload: Any, correlation: str) -> list[dict[str, Any]] | None:
    try:
        body = json.loads(bytes(payload))
    except (TypeError, ValueError):
        return None
    responses = body.get("responses") if isinstance(body, dict) else None
    if not isinstance(responses, list) or not responses:
        return None
    mine = [r for r in responses if isinstance(r, dict) and r.get("correlationData") == correlation]
    return mine or None


def _check(worker_id: str) -> None:
    """An instance id is also a valid worker id (one topic level, no wildcards)."""
    if not WORKER_ACCOUNT.match(worker_id):
        raise CredentialError(f"not an instance id: {printable(worker_id, 80)}")
