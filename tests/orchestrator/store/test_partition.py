"""A leader cut off from PostgreSQL (its connection paused mid-stream, as a partition looks to
it) stops leading before its lease runs out: the standby cannot take the lease yet when the
leader has already stepped down. Once the link heals, the deposed leader's writes fail."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy.engine import make_url

from kernel.clock import SystemClock
from kernel.job_record import JobMove
from kernel.job_state import JobState
from orchestrator.control.leadership import Leadership
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from orchestrator.store.leases import NotLeader
from orchestrator.store.migrate import upgrade_to_head
from tests.support.jobs import submission
from tests.support.waits import async_wait_until

TTL = timedelta(seconds=4)


class PausableProxy:
    """TCP between the leader and PostgreSQL; `pause` holds every byte either way."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._connect, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _connect(
        self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter
    ) -> None:
        server_in, server_out = await asyncio.open_connection("127.0.0.1", self.target_port)
        await asyncio.gather(
            self._pump(client_in, server_out),
            self._pump(server_in, client_out),
            return_exceptions=True,
        )

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                await self.flowing.wait()
                sink.write(data)
                await sink.drain()
        finally:
            sink.close()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()


@pytest.fixture
async def proxy(postgres_url: str) -> AsyncIterator[PausableProxy]:
    link = PausableProxy(make_url(postgres_url).port or 5432)
    await link.start()
    yield link
    link.flowing.set()
    await link.stop()


@pytest.mark.postgres
async def test_a_leader_cut_off_from_the_database_steps_down_before_its_lease_ends(
    postgres_url: str, proxy: PausableProxy
) -> None:
    direct = make_engine(postgres_url)
    upgrade_to_head(direct)
    standby_store = JobStore(direct, SystemClock())
    through_proxy = make_url(postgres_url).set(port=proxy.port)
    leader_store = JobStore(
        make_engine(through_proxy.render_as_string(hide_password=False)), SystemClock()
    )
    standby_store.intake.accept_batch([submission("partitioned-1")])
    leader = Leadership(
        leader_store.leases,
        SystemClock(),
        "control-plane",
        "leader",
        ttl=TTL,
        margin=timedelta(seconds=1.5),
    )
    stop = asyncio.Event()
    running = asyncio.create_task(leader.run(stop))
    try:
        await async_wait_until(leader.leading, 10, "the leader to lead")
        fence = leader.current()
        proxy.flowing.clear()  # the partition
        await async_wait_until(lambda: not leader.leading(), 10, "the leader to step down")
        # It stepped down while its lease still ran: nobody else could lead yet.
        assert (
            await asyncio.to_thread(standby_store.leases.claim_lease, "control-plane", "b", TTL)
            is None
        )
        with pytest.raises(NotLeader):
            leader.current()

        async def standby_leads() -> bool:
            taken = await asyncio.to_thread(
                standby_store.leases.claim_lease, "control-plane", "b", TTL
            )
            return taken is not None

        await async_wait_until(standby_leads, 15, "the lease to run out for the standby")
        proxy.flowing.set()  # the partition heals: the deposed leader's late write fails
        move = JobMove(
            "partitioned-1", 1, (JobState.ASSIGNED,), "late", worker_id="i-0late", gpu_index=0
        )
        with pytest.raises(NotLeader):
            await asyncio.to_thread(leader_store.apply_moves, [move], "leader", fence)
        assert standby_store.get("partitioned-1").state is JobState.QUEUED
    finally:
        proxy.flowing.set()
        stop.set()
        await running
        leader_store.dispose()
        standby_store.dispose()
