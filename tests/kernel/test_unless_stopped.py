"""The one race against `stop` every loop uses: work's result, or None once stopped (the work
cancelled), its error propagated, and work done at the moment of stop kept."""

from __future__ import annotations

import asyncio

import pytest

from kernel.clock import Done, unless_stopped


async def test_work_that_finishes_first_gives_its_result_even_none() -> None:
    async def nothing() -> None:
        return None

    assert await unless_stopped(nothing(), asyncio.Event()) == Done(None)


async def test_stop_first_cancels_the_work_and_says_so() -> None:
    stop, started = asyncio.Event(), asyncio.Event()
    cancelled = False

    async def forever() -> int:
        nonlocal cancelled
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled = True
            raise
        return 1

    async def stop_once_started() -> None:
        await started.wait()
        stop.set()

    stopper = asyncio.create_task(stop_once_started())
    assert await unless_stopped(forever(), stop) is None
    await stopper
    await asyncio.sleep(0)  # the cancellation is delivered
    assert cancelled


async def test_the_works_error_propagates() -> None:
    async def broken() -> int:
        raise ConnectionError("the session ended")

    with pytest.raises(ConnectionError, match="session ended"):
        await unless_stopped(broken(), asyncio.Event())


async def test_work_done_when_stop_is_already_set_is_kept() -> None:
    stop = asyncio.Event()
    stop.set()
    received = asyncio.get_running_loop().create_future()
    received.set_result(["a message"])

    assert await unless_stopped(received, stop) == Done(["a message"])
