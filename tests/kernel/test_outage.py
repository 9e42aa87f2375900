"""A loop's outage: waits that double up to a ceiling, drawn between half and all of it so that
replicas do not retry in step, one log line when it begins and one when it ends; a loop that
raises anyway is started again, and a configuration error still stops the process."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kernel.clock import FakeClock
from kernel.errors import ConfigurationError, StoreUnavailable
from kernel.outage import Outage, OutageBoard, keep_running

log = logging.getLogger("test.outage")


def test_waits_double_up_to_the_ceiling_and_the_outage_is_logged_once_each_way(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    draws = iter([0.0, 0.999, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    outage = Outage(
        "the store", log, clock, first_wait=1.0, longest_wait=8.0, draw=lambda: next(draws)
    )
    caplog.set_level(logging.WARNING)
    error = StoreUnavailable("connection refused\npostgresql://user:secret@db/x")
    waits = [outage.failed(error) for _ in range(6)]
    assert waits[0] == 0.5  # half the first ceiling, at the lowest draw
    assert 1.99 < waits[1] < 2.0  # nearly all of the second
    assert waits[2] == 3.0
    assert waits[3:] == [4.0, 4.0, 4.0]  # the ceiling holds at 8 s: half of it, drawn lowest
    assert outage.ongoing
    clock.advance(90)
    outage.answered()
    assert not outage.ongoing
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert "the store does not answer" in lines[0]
    assert "secret" not in lines[0]
    assert "answers again after 90 s and 6 failed tries" in lines[1]
    assert outage.failed(error) == 0.5  # a new outage starts from the first wait


async def test_a_loop_that_raises_is_started_again_until_stopped() -> None:
    stop, runs = asyncio.Event(), []

    async def flaky(_: asyncio.Event) -> None:
        runs.append(1)
        if len(runs) < 3:
            raise RuntimeError("a bug")
        stop.set()

    board = OutageBoard()
    await keep_running("flaky", flaky, stop, FakeClock(), log, board)
    assert len(runs) == 3
    assert board.restarts == {"flaky": 2}
    assert board.ongoing() == {}  # it runs again: counted, not out


def test_the_board_shows_each_dependency_out_now_and_since_when() -> None:
    clock, board = FakeClock(), OutageBoard()
    intake = Outage("the jobs queue", log, clock, board=board)
    notices = Outage("the jobs queue", log, clock, board=board)
    store = Outage("the store", log, clock, board=board)
    began = clock.now()
    intake.failed(ConnectionError("reset"))
    clock.advance(5)
    notices.failed(ConnectionError("reset"))
    store.failed(ConnectionError("reset"))
    assert board.ongoing() == {"the jobs queue": began, "the store": clock.now()}
    intake.answered()
    store.answered()
    assert board.ongoing() == {"the jobs queue": clock.now()}  # one loop still cut off
    notices.answered()
    assert board.ongoing() == {}
    assert board.begun == {"the jobs queue": 2, "the store": 1}


async def test_a_configuration_error_still_stops_the_process() -> None:
    async def misconfigured(_: asyncio.Event) -> None:
        raise ConfigurationError("the API cannot listen on 0.0.0.0:80")

    with pytest.raises(ConfigurationError):
        await keep_running("API", misconfigured, asyncio.Event(), FakeClock(), log)


async def test_an_outage_is_not_shown_after_its_loop_stopped_or_started_again() -> None:
    clock, board, stop = FakeClock(), OutageBoard(), asyncio.Event()
    runs: list[int] = []

    async def cut_off_then_failing(_: asyncio.Event) -> None:
        runs.append(1)
        Outage("the store", log, clock, board=board).failed(ConnectionError("reset"))
        assert len(board.ongoing()) == 1  # the first run's outage went with it
        if len(runs) == 1:
            raise RuntimeError("a bug mid-outage")  # started again, with a new outage

    await asyncio.create_task(keep_running("intake", cut_off_then_failing, stop, clock, log, board))
    assert len(runs) == 2
    assert board.ongoing() == {}  # the task that saw the second outage has ended
    assert board.begun == {"the store": 2}


def test_an_outage_of_a_closed_event_loop_is_not_shown() -> None:
    board = OutageBoard()
    loop = asyncio.new_event_loop()

    async def cut_off_for_ever() -> None:
        Outage("the broker", log, FakeClock(), board=board).failed(ConnectionError("reset"))
        await asyncio.Event().wait()

    task = loop.create_task(cut_off_for_ever())
    loop.run_until_complete(asyncio.sleep(0))  # the task starts, sees the outage, waits
    assert "the broker" in board.ongoing()
    loop.close()  # with the task pending, as a process's end or a test's may leave it
    assert not task.done()
    assert board.ongoing() == {}
