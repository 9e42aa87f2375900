"""The IMDSv2 emulator, the client's token handling and the interruption watcher."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import aiohttp
import pytest

from kernel.clock import FakeClock, SystemClock
from tests.support.renders import Buckets, video_job
from tests.support.waits import async_wait_until
from worker_ami.agent.errors import ImdsError
from worker_ami.agent.imds import ImdsClient, InterruptionWatcher, NoticeKind, SpotNotice
from worker_ami.agent.imds_emulator import TOKEN_HEADER, TTL_HEADER, ImdsEmulator
from worker_ami.agent.report import RunStatus
from worker_ami.agent.runner import JobRunner

ACTION_AT = datetime(2026, 1, 1, 12, 2, tzinfo=UTC)


async def test_tokens_are_required_and_checked(imds: tuple[ImdsEmulator, str]) -> None:
    _, url = imds
    async with aiohttp.ClientSession() as http:
        async with http.put(f"{url}/latest/api/token") as response:
            assert response.status == 400  # no TTL header
        async with http.put(f"{url}/latest/api/token", headers={TTL_HEADER: "99999"}) as response:
            assert response.status == 400
        async with http.get(f"{url}/latest/meta-data/instance-id") as response:
            assert response.status == 401
        headers = {TOKEN_HEADER: "forged"}
        async with http.get(f"{url}/latest/meta-data/instance-id", headers=headers) as response:
            assert response.status == 401
        async with http.put(f"{url}/latest/api/token", headers={TTL_HEADER: "60"}) as response:
            token = await response.text()
        headers = {TOKEN_HEADER: token}
        async with http.get(f"{url}/latest/meta-data/instance-id", headers=headers) as response:
            assert (response.status, await response.text()) == (200, "i-0123456789abcdef0")
        path = f"{url}/latest/meta-data/spot/instance-action"
        async with http.get(path, headers=headers) as response:
            assert response.status == 404


async def test_an_expired_token_is_refused_and_the_client_gets_a_new_one() -> None:
    clock = FakeClock()
    emulator = ImdsEmulator(clock)
    url = await emulator.start()
    try:
        async with aiohttp.ClientSession() as http:
            client = ImdsClient(http, url, clock, token_ttl=300)
            assert await client.get("instance-type") == "g6e.xlarge"
            clock.advance(200)
            assert await client.get("instance-type") == "g6e.xlarge"
            assert emulator.token_requests == 1  # reused
            clock.advance(250)  # within the refresh margin: renewed before it expires
            assert await client.get("instance-type") == "g6e.xlarge"
            assert emulator.token_requests == 2
            emulator.expire_tokens()  # IMDS forgot it: a 401, then one retry with a new token
            assert await client.get("instance-life-cycle") == "spot"
            assert emulator.unauthorized == 1
            assert emulator.token_requests == 3
    finally:
        await emulator.stop()


async def test_token_is_reused_across_many_polls(imds: tuple[ImdsEmulator, str]) -> None:
    emulator, url = imds
    async with aiohttp.ClientSession() as http:
        client = ImdsClient(http, url, SystemClock())
        for _ in range(20):
            assert await client.instance_action() is None
            assert await client.rebalance() is None
        identity = await client.identity()
    assert emulator.token_requests == 1
    assert (identity.availability_zone, identity.lifecycle) == ("us-east-1a", "spot")


async def test_notices_are_parsed_and_delivered_once(imds: tuple[ImdsEmulator, str]) -> None:
    emulator, url = imds
    seen: list[SpotNotice] = []

    async def on_notice(notice: SpotNotice) -> None:
        seen.append(notice)

    async with aiohttp.ClientSession() as http:
        client = ImdsClient(http, url, SystemClock())
        watcher = InterruptionWatcher(client, SystemClock(), on_notice, poll_seconds=0.01)
        await watcher.poll_once()
        assert seen == []
        emulator.set_rebalance(ACTION_AT - timedelta(minutes=15))
        emulator.set_instance_action("terminate", ACTION_AT)
        for _ in range(3):
            await watcher.poll_once()
    assert [(n.kind, n.action, n.time) for n in seen] == [
        (NoticeKind.INSTANCE_ACTION, "terminate", ACTION_AT),
        (NoticeKind.REBALANCE, None, ACTION_AT - timedelta(minutes=15)),
    ]


async def test_notices_can_be_driven_over_http(imds: tuple[ImdsEmulator, str]) -> None:
    _, url = imds
    async with aiohttp.ClientSession() as http:
        body = {"action": "stop", "time": ACTION_AT.isoformat()}
        async with http.post(f"{url}/_emulator/instance-action", json=body) as response:
            assert response.status == 204
        client = ImdsClient(http, url, SystemClock())
        notice = await client.instance_action()
        assert notice is not None
        assert (notice.action, notice.time) == ("stop", ACTION_AT)
        async with http.delete(f"{url}/_emulator/notices") as response:
            assert response.status == 204
        assert await client.instance_action() is None


async def test_an_unreachable_imds_is_a_typed_error() -> None:
    async with aiohttp.ClientSession() as http:
        client = ImdsClient(http, "http://127.0.0.1:9", SystemClock(), timeout_seconds=0.5)
        with pytest.raises(ImdsError, match="unreachable"):
            await client.get("instance-id")


async def test_an_instance_action_checkpoints_the_running_job(
    imds: tuple[ImdsEmulator, str], runner: JobRunner, buckets: Buckets
) -> None:
    emulator, url = imds
    spec = video_job(buckets, "noticed", steps=40)
    noticed = asyncio.Event()

    async def on_notice(notice: SpotNotice) -> None:
        if notice.kind is NoticeKind.INSTANCE_ACTION:
            runner.request_checkpoint(f"spot {notice.action}")
            noticed.set()

    def after_step(step: int) -> None:
        if step == 2:
            emulator.set_instance_action()

    runner.on_step = after_step
    stop = asyncio.Event()
    async with aiohttp.ClientSession() as http:
        watcher = InterruptionWatcher(
            ImdsClient(http, url, SystemClock()), SystemClock(), on_notice, poll_seconds=0.02
        )
        watching = asyncio.create_task(watcher.run(stop))
        report = await runner.run(spec, attempt=1)
        stop.set()
        await watching
    await async_wait_until(noticed.is_set)
    assert report.status is RunStatus.PREEMPTED
    assert 2 <= report.steps_done < spec.steps
    assert report.checkpoint is not None
    assert report.checkpoint.endswith(f"/{report.steps_done:06d}/manifest.json")
