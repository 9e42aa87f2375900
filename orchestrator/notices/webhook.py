"""A notice POSTed to a producer's webhook, signed with HMAC-SHA256 (a receiver checks it with
`framefleet_client.notices.verify`):

    FrameFleet-Notice-Id: 1042                 the key to deduplicate by
    FrameFleet-Timestamp: 1796640000           when it was signed (Unix seconds)
    FrameFleet-Signature: v1=<hex>             HMAC-SHA256(secret, "<timestamp>." + body)

The URL is checked again before each try, and every address its host resolves to is checked
as aiohttp connects (the resolver refuses a non-public one): a name that points inside the
network by the time it is called is refused, not called. Redirects are not followed."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import socket
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from kernel.clock import Clock
from kernel.notify_spec import WebhookRule
from orchestrator.store.notice_book import StoredNotice

NOTICE_ID_HEADER = "FrameFleet-Notice-Id"
TIMESTAMP_HEADER = "FrameFleet-Timestamp"
SIGNATURE_HEADER = "FrameFleet-Signature"
USER_AGENT = "FrameFleet-Notices/1"


def signature(secret: bytes, timestamp: int, body: bytes) -> str:
    return "v1=" + hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


class RefusedAddress(OSError):
    """The webhook's host resolved to an address the deployment does not call."""


class CheckedResolver(AbstractResolver):
    """The system's resolver, refusing a host any of whose addresses the rule refuses."""

    def __init__(self, rule: WebhookRule) -> None:
        self._rule = rule
        self._resolver = aiohttp.ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._resolver.resolve(host, port, family)
        for result in found:
            problem = self._rule.address_refusal(ipaddress.ip_address(result["host"]))
            if problem is not None:
                raise RefusedAddress(f"{host} resolves to {problem}")
        return found

    async def close(self) -> None:
        await self._resolver.close()


class WebhookSender:
    def __init__(
        self, secret: bytes, rule: WebhookRule, clock: Clock, timeout_seconds: float = 10.0
    ) -> None:
        self._secret, self._rule, self._clock = secret, rule, clock
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> WebhookSender:
        connector = aiohttp.TCPConnector(resolver=CheckedResolver(self._rule))
        self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        return self

    async def __aexit__(self, *_: Any) -> None:
        if self._session is not None:
            await self._session.close()

    async def send(self, notice: StoredNotice) -> str | None:
        """None when the receiver took it (2xx); else why not."""
        assert self._session is not None, "use `async with`"
        if notice.url is None:
            return "no webhook URL"
        problem = self._rule.url_refusal(notice.url)
        if problem is not None:
            return problem
        body = notice.body.encode()
        timestamp = int(self._clock.now().timestamp())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            NOTICE_ID_HEADER: notice.notice_id,
            TIMESTAMP_HEADER: str(timestamp),
            SIGNATURE_HEADER: signature(self._secret, timestamp, body),
        }
        try:
            async with self._session.post(
                notice.url, data=body, headers=headers, allow_redirects=False
            ) as answer:
                if 200 <= answer.status < 300:
                    return None
                return f"HTTP {answer.status}"
        except TimeoutError:
            return f"no answer within {self._timeout.total:g} s"
        except (aiohttp.ClientError, OSError) as error:
            return f"{type(error).__name__}: {error}"
