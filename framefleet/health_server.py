"""Every process's operator endpoints (aiohttp): `/metrics` in the Prometheus text format,
`/healthz` (the process is alive: its event loop answers) and `/readyz` (each dependency it
needs answers: the store, the broker, the queues; 503 with each failing check's reason).

A readiness check is an async callable that returns None when its dependency is fine and
raises (or times out) when it is not; the reason shown is the error's first line, cut short,
so a driver's error cannot leak a connection string into a probe's answer."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from kernel.errors import ConfigurationError

log = logging.getLogger(__name__)

ReadinessCheck = Callable[[], Awaitable[None]]
CHECK_TIMEOUT_SECONDS = 3.0
MAX_REASON = 200


@dataclass
class HealthServer:
    registry: CollectorRegistry
    checks: Mapping[str, ReadinessCheck]
    host: str = "127.0.0.1"
    port: int = 0  # 0: any free port (see `bound_port`)
    _runner: web.AppRunner | None = None
    bound_port: int = 0

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._alive)
        app.router.add_get("/readyz", self._ready)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        try:
            await site.start()
        except OSError as error:
            await self._runner.cleanup()
            why = os.strerror(error.errno) if error.errno else str(error)
            raise ConfigurationError(
                f"cannot serve metrics on {self.host}:{self.port}: {why}"
            ) from None
        addresses = self._runner.addresses
        self.bound_port = int(addresses[0][1]) if addresses else self.port
        log.info("metrics and health on http://%s:%d", self.host, self.bound_port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def readiness(self) -> dict[str, str]:
        """Each check's verdict: "ok" or why not."""
        names = list(self.checks)
        results = await asyncio.gather(
            *(asyncio.wait_for(self.checks[n](), CHECK_TIMEOUT_SECONDS) for n in names),
            return_exceptions=True,
        )
        return {name: _verdict(result) for name, result in zip(names, results, strict=True)}

    async def _metrics(self, _request: web.Request) -> web.Response:
        body = await asyncio.to_thread(generate_latest, self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _alive(self, _request: web.Request) -> web.Response:
        return web.json_response({"alive": True})

    async def _ready(self, _request: web.Request) -> web.Response:
        verdicts = await self.readiness()
        ready = all(v == "ok" for v in verdicts.values())
        return web.Response(
            text=json.dumps({"ready": ready, "checks": verdicts}, sort_keys=True),
            content_type="application/json",
            status=200 if ready else 503,
        )


def _verdict(result: object) -> str:
    if not isinstance(result, BaseException):
        return "ok"
    if isinstance(result, TimeoutError):
        return f"no answer within {CHECK_TIMEOUT_SECONDS:.0f} s"
    text = (str(result).strip().splitlines() or [type(result).__name__])[0]
    return f"{type(result).__name__}: {text[:MAX_REASON]}"
