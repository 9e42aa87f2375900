"""A flood of one refusal is one log line a minute with a count, not one line each."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from kernel.clock import FakeClock
from kernel.log_throttle import LogThrottle
from orchestrator.control.refusals import RefusedMessages

START = datetime(2026, 12, 4, tzinfo=UTC)


def test_one_line_per_key_per_interval_then_the_count_held_back() -> None:
    clock = FakeClock(START)
    throttle = LogThrottle(clock, timedelta(seconds=60), keys=2)
    assert throttle.allow("a") == 0
    assert [throttle.allow("a") for _ in range(5)] == [None] * 5
    assert throttle.allow("b") == 0  # another key has its own line
    clock.advance(61)
    assert throttle.allow("a") == 5
    throttle.allow("c")  # a third key: the least recently used one is forgotten
    assert throttle.allow("b") == 0


def test_a_refusal_flood_is_counted_in_full_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock(START)
    refusals = RefusedMessages(clock)
    with caplog.at_level(logging.WARNING, logger="orchestrator.control.refusals"):
        for _ in range(10_000):
            refusals.refuse("unparseable", "ff/v1/workers/w1/events", "not JSON", b"\x00")
        refusals.refuse("unparseable", "ff/v1/workers/w2/events", "not JSON", b"\x00")
        clock.advance(120)
        refusals.refuse("unparseable", "ff/v1/workers/w1/events", "not JSON", b"\x00")
    assert refusals.count("unparseable") == 10_002
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3
    assert "w1" in lines[0]
    assert "w2" in lines[1]
    assert lines[2].endswith("(9999 more since the last such line)")
