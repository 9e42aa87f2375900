"""How a long-running loop lives through a dependency's outage (issue 48): it waits longer
after each failed try, with jitter so that replicas cut off together do not retry together,
logs one line when the outage begins and one when it ends (not one per try), and never
exits for it. `keep_running` is the last line of defence around every loop of a process: a
loop that raises anyway is logged and started again, so one fault never stops a process."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

from kernel.clock import Clock, sleep_unless_stopped
from kernel.errors import ConfigurationError
from kernel.outside_text import printable

FIRST_WAIT_SECONDS = 0.5
LONGEST_WAIT_SECONDS = 30.0


@dataclass
class Outage:
    """One dependency as one loop sees it: `failed` after each failed try (it says how long
    to wait), `answered` after each good one."""

    what: str  # the dependency, as a person reads it: "the interruptions queue"
    log: logging.Logger
    clock: Clock
    first_wait: float = FIRST_WAIT_SECONDS
    longest_wait: float = LONGEST_WAIT_SECONDS
    draw: Callable[[], float] = random.random  # in [0, 1): the jitter
    since: datetime | None = field(default=None, init=False)
    tries: int = field(default=0, init=False)

    @property
    def ongoing(self) -> bool:
        return self.since is not None

    def failed(self, error: BaseException) -> float:
        """The seconds to wait before the next try: the ceiling doubles with each failed try
        up to `longest_wait`, and the wait is drawn between half the ceiling and all of it."""
        if self.since is None:
            self.since = self.clock.now()
            self.log.warning(
                "%s does not answer; retrying with backoff until it does: %s",
                self.what,
                _first_line(error),
            )
        self.tries += 1
        ceiling: float = min(self.longest_wait, self.first_wait * 2.0 ** (self.tries - 1))
        return ceiling * (0.5 + 0.5 * self.draw())

    def answered(self) -> None:
        if self.since is not None:
            lasted = (self.clock.now() - self.since).total_seconds()
            self.log.warning(
                "%s answers again after %.0f s and %d failed tries", self.what, lasted, self.tries
            )
        self.since, self.tries = None, 0


LoopRun = Callable[[asyncio.Event], Awaitable[None]]


async def keep_running(
    name: str, run: LoopRun, stop: asyncio.Event, clock: Clock, log: logging.Logger
) -> None:
    """Run a loop until `stop`; if it raises, log it and start it again after a backoff.
    A configuration error is not a fault to wait out: it stops the process, as at start."""
    outage = Outage(f"the {name} loop", log, clock)
    while not stop.is_set():
        try:
            await run(stop)
            return
        except ConfigurationError:
            raise
        except Exception as error:
            log.exception("the %s loop failed; starting it again", name)
            await sleep_unless_stopped(clock, stop, outage.failed(error))


def _first_line(error: BaseException) -> str:
    # A driver's error can carry a connection string on later lines: the first, cut short.
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return printable(text, 200)
