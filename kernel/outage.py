"""How a long-running loop lives through a dependency's outage (issue 48): it waits longer
after each failed try, with jitter so that replicas cut off together do not retry together,
logs one line when the outage begins and one when it ends (not one per try), and never
exits for it. `keep_running` is the last line of defence around every loop of a process: a
loop that raises anyway is logged and started again, so one fault never stops a process.

Each outage is on its process's `OutageBoard` while it lasts, which `/readyz` and the
`framefleet_outage_ongoing` metric read: an operator sees which dependency is out, and since
when, without reading logs."""

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
class OutageBoard:
    """The outages a process's loops are in now, and how many each dependency has had.

    An outage is shown while the task that saw it runs and until it ends: a loop stopped or
    started again mid-outage (its `Outage` dropped with it) does not leave it shown for ever."""

    _ongoing: dict[int, tuple[Outage, asyncio.Task[object] | None]] = field(
        default_factory=dict
    )  # id(outage) -> the outage and the task that saw it begin
    begun: dict[str, int] = field(default_factory=dict)  # dependency -> outages so far
    restarts: dict[str, int] = field(default_factory=dict)  # loop -> times it raised

    def began(self, outage: Outage) -> None:
        self._ongoing[id(outage)] = (outage, _current_task())
        self.begun[outage.what] = self.begun.get(outage.what, 0) + 1

    def ended(self, outage: Outage) -> None:
        self._ongoing.pop(id(outage), None)

    def forget(self, task: asyncio.Task[object] | None) -> None:
        """The outages `task` saw begin: its loop is being started again, with new ones."""
        for key, (_, seen_by) in list(self._ongoing.items()):
            if seen_by is task:
                del self._ongoing[key]

    def ongoing(self) -> dict[str, datetime]:
        """Each dependency out now, and since when (the earliest, where loops share one)."""
        out: dict[str, datetime] = {}
        for key, (outage, task) in list(self._ongoing.items()):
            if task is not None and (task.done() or task.get_loop().is_closed()):
                del self._ongoing[key]  # its loop is gone (a loop closed with it pending too)
            elif outage.since is not None and (
                outage.what not in out or outage.since < out[outage.what]
            ):
                out[outage.what] = outage.since
        return out


def _current_task() -> asyncio.Task[object] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no event loop runs (a synchronous caller)
        return None


# One board per process, as a process has one log: every loop's outages are that process's,
# and its /readyz and metrics read them here. A test that runs several processes' loops in
# one interpreter passes each its own board.
PROCESS_OUTAGES = OutageBoard()


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
    board: OutageBoard = field(default_factory=lambda: PROCESS_OUTAGES)
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
            self.board.began(self)
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
            self.board.ended(self)
        self.since, self.tries = None, 0


LoopRun = Callable[[asyncio.Event], Awaitable[None]]


async def keep_running(
    name: str,
    run: LoopRun,
    stop: asyncio.Event,
    clock: Clock,
    log: logging.Logger,
    board: OutageBoard = PROCESS_OUTAGES,
) -> None:
    """Run a loop until `stop`; if it raises, log it and start it again after a backoff.
    A configuration error is not a fault to wait out: it stops the process, as at start."""
    # A loop started again runs again: its failure is counted, not shown as ongoing.
    outage = Outage(f"the {name} loop", log, clock, board=OutageBoard())
    while not stop.is_set():
        try:
            await run(stop)
            return
        except ConfigurationError:
            raise
        except Exception as error:
            log.exception("the %s loop failed; starting it again", name)
            board.restarts[name] = board.restarts.get(name, 0) + 1
            board.forget(_current_task())
            await sleep_unless_stopped(clock, stop, outage.failed(error))


def _first_line(error: BaseException) -> str:
    # A driver's error can carry a connection string on later lines: the first, cut short.
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return printable(text, 200)
