"""A Mosquitto with the shipped ACL and a password per account, and its clients: the control
plane (the real service on a store) and workers, each under its own account. What the tests
over a real broker share."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import aiomqtt
from sqlalchemy import Engine

from framefleet.local_ports import free_port
from kernel.clock import SystemClock
from kernel.mqtt_link import LinkSettings, MqttLink
from orchestrator.control.reception import WORKER_TOPICS
from orchestrator.control.refusals import RefusedMessages
from orchestrator.control.service import ControlPlaneService
from orchestrator.control.settings import ControlSettings
from orchestrator.store.job_store import JobStore
from tests.support.mosquitto import LocalMosquitto
from tests.support.paths import ACL

CONTROL_PLANE = "framefleet-control-plane"


@contextmanager
def acl_broker(folder: Path, passwords: dict[str, str]) -> Iterator[int]:
    """Its port; only the accounts in `passwords` connect, each within the ACL."""
    broker = LocalMosquitto(folder, free_port(), acl_file=ACL, passwords=passwords)
    broker.start()
    try:
        yield broker.port
    finally:
        broker.stop()


@asynccontextmanager
async def as_worker(
    port: int, worker_id: str, password: str, **options: Any
) -> AsyncIterator[aiomqtt.Client]:
    async with aiomqtt.Client(
        "127.0.0.1",
        port,
        identifier=worker_id,
        username=worker_id,
        password=password,
        protocol=aiomqtt.ProtocolVersion.V311,
        **options,
    ) as client:
        yield client


def plane_on_broker(
    engine: Engine, port: int, password: str, settings: ControlSettings
) -> tuple[ControlPlaneService, JobStore]:
    """The control plane on this store, connected as its own account."""
    clock = SystemClock()
    store = JobStore(engine, clock)
    link = LinkSettings(
        host="127.0.0.1", port=port, client_id="cp", username=CONTROL_PLANE, password=password
    )
    plane = ControlPlaneService(
        store,
        clock,
        settings,
        connect=lambda deliver, admit: MqttLink(link, WORKER_TOPICS, deliver, clock, admit=admit),
        refusals=RefusedMessages(clock),
    )
    return plane, store
