"""The injected clock: everything that reads time takes one, so tests and the simulator drive it."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware (UTC)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back, for measuring how long things take."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Wall-clock time for live processes."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class FakeClock:
    """A clock that only moves when told to; `sleep` advances it instead of waiting."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._start = self._now

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return (self._now - self._start).total_seconds()

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)

    async def sleep(self, seconds: float) -> None:
        self.advance(seconds)
        await asyncio.sleep(0)


@dataclass(frozen=True)
class Done(Generic[T]):
    """What work that finished gave (boxed, so that a result of None is told from stopped)."""

    value: T


async def unless_stopped(work: Awaitable[T], stop: asyncio.Event) -> Done[T] | None:
    """Await `work` unless `stop` is set first: its result, or None once stopped (the work is
    then cancelled). Work that finished at the moment `stop` was set counts as done, so what
    it received is handled rather than lost; its error propagates."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
        if not task.done():
            task.cancel()
    return Done(task.result()) if task in done else None


async def sleep_unless_stopped(clock: Clock, stop: asyncio.Event, seconds: float) -> None:
    """Sleep on the injected clock, waking early when `stop` is set."""
    await unless_stopped(clock.sleep(seconds), stop)


def stop_on_signals() -> asyncio.Event:
    """An event that SIGTERM or SIGINT sets: how every long-running command is told to drain
    and stop (call it inside the running event loop)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return stop
