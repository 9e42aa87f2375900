"""A producer's webhook for the notices' tests: a real HTTP server on 127.0.0.1 that records
what it was sent and answers as told (a status, or no answer at all)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web

from framefleet.local_ports import free_port

HANG = 0  # an answer that never comes


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    url: str
    answers: list[int] = field(default_factory=list)  # in turn; then 204
    received: list[Received] = field(default_factory=list)
    _never: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append(Received(dict(request.headers), await request.read()))
        status = self.answers.pop(0) if self.answers else 204
        if status == HANG:
            await self._never.wait()
        return web.Response(status=status)


@asynccontextmanager
async def webhook_receiver() -> AsyncIterator[Receiver]:
    port = free_port()
    receiver = Receiver(f"http://127.0.0.1:{port}/hooks/framefleet")
    app = web.Application()
    app.router.add_post("/hooks/framefleet", receiver.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield receiver
    finally:
        receiver._never.set()
        await runner.cleanup()
