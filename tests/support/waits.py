"""Waiting on a condition, never on time: poll it until it holds or the wait times out."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

DEFAULT_TIMEOUT = 30.0


def wait_until(
    predicate: Callable[[], bool], timeout: float = DEFAULT_TIMEOUT, what: str = ""
) -> None:
    """Poll a condition until it holds; fail the test if it does not within `timeout`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(0.05)


async def async_wait_until(
    predicate: Callable[[], bool | Awaitable[bool]],
    within: float = DEFAULT_TIMEOUT,
    what: str = "",
) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        result = predicate()
        if isinstance(result, Awaitable):
            result = await result
        if result:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what or predicate}")
        await asyncio.sleep(0.05)
