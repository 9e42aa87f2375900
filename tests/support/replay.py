"""A small spot trace replayed in compressed time, a launch request into it, and the events it
records."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from autoscaler.ec2.ports import LaunchRequest
from autoscaler.market.trace import Trace, ZoneTrace
from autoscaler.pools import Pool
from kernel.market import Market

START = datetime(2023, 3, 1, tzinfo=UTC)


GAP = timedelta(seconds=100)


SPEED = 100.0  # one tick per wall second


UP = Pool("p3.2xlarge", "us-east-1a", Market.SPOT)


DOWN = Pool("p3.2xlarge", "us-east-1c", Market.SPOT)


def trace() -> Trace:
    return Trace(
        START,
        GAP,
        {
            "us-east-1a": ZoneTrace(
                "us-east-1a", "p3.2xlarge", (1, 1, 0, 0, 1, 1), (1.0,) * 6, 3.06, 1
            ),
            "us-east-1c": ZoneTrace(
                "us-east-1c",
                "p3.2xlarge",
                (0, 1, 1, 1, 1, 1),
                (2.0, 2.0, 4.0, 4.0, 4.0, 4.0),
                3.06,
                1,
            ),
        },
    )


def launch(pools: tuple[Pool, ...]) -> LaunchRequest:
    return LaunchRequest("demo", pools[0].market, pools, 1, f"token-{uuid.uuid4()}", "a job")


class RecordedEvents:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, str]]] = []

    async def put(self, detail_type: str, detail: Mapping[str, str]) -> None:
        self.sent.append((detail_type, dict(detail)))
