"""An IMDSv2 emulator (aiohttp) with the spot paths moto and AWS's mock don't offer here.

Token PUT with a TTL header, 401 for a missing or expired token, instance identity, and
`spot/instance-action` and `events/recommendations/rebalance` answering 404 until a test (or the
market replay) sets them, in-process or over `POST /_emulator/...`.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from aiohttp import web

from kernel.clock import Clock

TOKEN_HEADER = "X-aws-ec2-metadata-token"
TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
MAX_TTL = 21600


@dataclass(frozen=True)
class InstanceIdentity:
    instance_id: str = "i-0123456789abcdef0"
    instance_type: str = "g6e.xlarge"
    availability_zone: str = "us-east-1a"
    lifecycle: str = "spot"  # or "on-demand"


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class ImdsEmulator:
    def __init__(self, clock: Clock, identity: InstanceIdentity | None = None) -> None:
        self._clock = clock
        self.identity = identity or InstanceIdentity()
        self._tokens: dict[str, datetime] = {}
        self._instance_action: dict[str, str] | None = None
        self._rebalance: dict[str, str] | None = None
        self.token_requests = 0
        self.unauthorized = 0
        self._runner: web.AppRunner | None = None

    # -- what tests and the market replay drive ---------------------------------------------

    def set_instance_action(self, action: str = "terminate", at: datetime | None = None) -> None:
        when = at or self._clock.now() + timedelta(minutes=2)
        self._instance_action = {"action": action, "time": _iso(when)}

    def set_rebalance(self, at: datetime | None = None) -> None:
        self._rebalance = {"noticeTime": _iso(at or self._clock.now())}

    def clear_notices(self) -> None:
        self._instance_action = None
        self._rebalance = None

    def expire_tokens(self) -> None:
        self._tokens.clear()

    # -- HTTP -------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_put("/latest/api/token", self._token)
        app.router.add_get("/latest/meta-data/{path:.*}", self._metadata)
        app.router.add_post("/_emulator/instance-action", self._control_instance_action)
        app.router.add_post("/_emulator/rebalance", self._control_rebalance)
        app.router.add_delete("/_emulator/notices", self._control_clear)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = site._server
        assert server is not None
        bound = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        return f"http://{host}:{bound}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _token(self, request: web.Request) -> web.Response:
        try:
            ttl = int(request.headers.get(TTL_HEADER, ""))
        except ValueError:
            return web.Response(status=400, text="missing or invalid TTL header")
        if not 1 <= ttl <= MAX_TTL:
            return web.Response(status=400, text="TTL out of range")
        token = secrets.token_urlsafe(32)
        self._tokens[token] = self._clock.now() + timedelta(seconds=ttl)
        self.token_requests += 1
        return web.Response(text=token, headers={TTL_HEADER: str(ttl)})

    def _authorized(self, request: web.Request) -> bool:
        expiry = self._tokens.get(request.headers.get(TOKEN_HEADER, ""))
        return expiry is not None and expiry > self._clock.now()

    async def _metadata(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            self.unauthorized += 1
            return web.Response(status=401, text="Unauthorized")
        path = request.match_info["path"].strip("/")
        values: dict[str, str | None] = {
            "instance-id": self.identity.instance_id,
            "instance-type": self.identity.instance_type,
            "placement/availability-zone": self.identity.availability_zone,
            "instance-life-cycle": self.identity.lifecycle,
            "spot/instance-action": json.dumps(self._instance_action)
            if self._instance_action
            else None,
            "events/recommendations/rebalance": json.dumps(self._rebalance)
            if self._rebalance
            else None,
        }
        value = values.get(path)
        if value is None:
            return web.Response(status=404, text="Not Found")
        return web.Response(text=value)

    async def _control_instance_action(self, request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else {}
        at = datetime.fromisoformat(body["time"]) if "time" in body else None
        self.set_instance_action(body.get("action", "terminate"), at)
        return web.Response(status=204)

    async def _control_rebalance(self, request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else {}
        self.set_rebalance(datetime.fromisoformat(body["time"]) if "time" in body else None)
        return web.Response(status=204)

    async def _control_clear(self, _request: web.Request) -> web.Response:
        self.clear_notices()
        return web.Response(status=204)
