"""IMDSv2 client and the interruption watcher.

The client keeps one session token and reuses it until shortly before it expires (IMDS
throttles per instance); a 401 drops the token and retries once with a new one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Literal, TypeVar

import aiohttp
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from kernel.clock import Clock, sleep_unless_stopped
from kernel.outside_text import first_problem
from worker_ami.agent.errors import ImdsError
from worker_ami.agent.imds_emulator import TOKEN_HEADER, TTL_HEADER, InstanceIdentity

log = logging.getLogger(__name__)
TOKEN_TTL_SECONDS = 21600
TOKEN_REFRESH_MARGIN = timedelta(seconds=60)


class NoticeKind(StrEnum):
    INSTANCE_ACTION = "instance-action"
    REBALANCE = "rebalance"


@dataclass(frozen=True)
class SpotNotice:
    kind: NoticeKind
    action: str | None  # terminate | stop | hibernate for instance-action
    time: datetime  # when the action happens (or when the rebalance was noticed)
    seen_at: datetime


class _InstanceAction(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    action: Literal["terminate", "stop", "hibernate"]
    time: AwareDatetime


class _Rebalance(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    notice_time: AwareDatetime = Field(alias="noticeTime")


# IMDS answers these paths with a few dozen bytes.
MAX_NOTICE_BYTES = 4096


def parse_instance_action(raw: str, seen_at: datetime) -> SpotNotice:
    """Total: a SpotNotice or an ImdsError, whatever IMDS (or something posing as it) says."""
    body = _parse(_InstanceAction, raw, "instance-action")
    return SpotNotice(NoticeKind.INSTANCE_ACTION, body.action, body.time, seen_at)


def parse_rebalance(raw: str, seen_at: datetime) -> SpotNotice:
    body = _parse(_Rebalance, raw, "rebalance recommendation")
    return SpotNotice(NoticeKind.REBALANCE, None, body.notice_time, seen_at)


_Notice = TypeVar("_Notice", _InstanceAction, _Rebalance)


def _parse(model: type[_Notice], raw: str, what: str) -> _Notice:
    if len(raw) > MAX_NOTICE_BYTES:
        raise ImdsError(f"{what} of {len(raw)} characters")
    try:
        return model.model_validate_json(raw, strict=True)
    except ValidationError as error:
        where, problem = first_problem(error)
        raise ImdsError(f"unreadable {what}: {where}: {problem}") from None


class ImdsClient:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        clock: Clock,
        token_ttl: int = TOKEN_TTL_SECONDS,
        timeout_seconds: float = 2.0,
    ) -> None:
        self._session = session
        self._base = base_url.rstrip("/")
        self._clock = clock
        self._ttl = token_ttl
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._token: str | None = None
        self._token_expiry = clock.now()

    async def _fresh_token(self) -> str:
        if (
            self._token is not None
            and self._clock.now() < self._token_expiry - TOKEN_REFRESH_MARGIN
        ):
            return self._token
        try:
            async with self._session.put(
                f"{self._base}/latest/api/token",
                headers={TTL_HEADER: str(self._ttl)},
                timeout=self._timeout,
            ) as response:
                if response.status != 200:
                    raise ImdsError(f"IMDS token request answered {response.status}")
                self._token = await response.text()
        except (aiohttp.ClientError, TimeoutError) as error:
            raise ImdsError(f"IMDS unreachable: {type(error).__name__} {error}") from None
        self._token_expiry = self._clock.now() + timedelta(seconds=self._ttl)
        return self._token

    async def get(self, path: str) -> str | None:
        """The metadata value at `path`, or None where IMDS answers 404."""
        for attempt in range(2):
            token = await self._fresh_token()
            try:
                async with self._session.get(
                    f"{self._base}/latest/meta-data/{path}",
                    headers={TOKEN_HEADER: token},
                    timeout=self._timeout,
                ) as response:
                    if response.status == 404:
                        return None
                    if response.status == 401 and attempt == 0:
                        self._token = None
                        continue
                    if response.status != 200:
                        raise ImdsError(f"IMDS {path} answered {response.status}")
                    return await response.text()
            except (aiohttp.ClientError, TimeoutError) as error:
                raise ImdsError(f"IMDS unreachable: {type(error).__name__} {error}") from None
        raise ImdsError(f"IMDS {path}: unauthorized with a fresh token")

    async def identity(self) -> InstanceIdentity:
        values = await asyncio.gather(
            *(
                self.get(path)
                for path in (
                    "instance-id",
                    "instance-type",
                    "placement/availability-zone",
                    "instance-life-cycle",
                )
            )
        )
        if any(value is None for value in values):
            raise ImdsError("IMDS is missing instance identity paths")
        instance_id, instance_type, zone, lifecycle = (str(v) for v in values)
        return InstanceIdentity(instance_id, instance_type, zone, lifecycle)

    async def instance_action(self) -> SpotNotice | None:
        raw = await self.get("spot/instance-action")
        return None if raw is None else parse_instance_action(raw, self._clock.now())

    async def rebalance(self) -> SpotNotice | None:
        raw = await self.get("events/recommendations/rebalance")
        return None if raw is None else parse_rebalance(raw, self._clock.now())


NoticeHandler = Callable[[SpotNotice], Awaitable[None]]


class InterruptionWatcher:
    """Polls both spot paths; hands each new notice to `on_notice` once."""

    def __init__(
        self, client: ImdsClient, clock: Clock, on_notice: NoticeHandler, poll_seconds: float = 2.0
    ) -> None:
        self._client = client
        self._clock = clock
        self._on_notice = on_notice
        self._poll = poll_seconds
        self._seen: set[tuple[NoticeKind, datetime]] = set()

    async def poll_once(self) -> None:
        for read in (self._client.instance_action, self._client.rebalance):
            try:
                notice = await read()
            except ImdsError as error:
                log.warning("IMDS poll failed: %s", error)
                continue
            if notice is not None and (notice.kind, notice.time) not in self._seen:
                self._seen.add((notice.kind, notice.time))
                log.info("spot notice: %s %s at %s", notice.kind, notice.action or "", notice.time)
                try:
                    await self._on_notice(notice)
                except Exception:
                    # The watcher must outlive one failed reaction: the next notice matters.
                    log.exception("reaction to %s failed", notice.kind)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.poll_once()
            await sleep_unless_stopped(self._clock, stop, self._poll)
