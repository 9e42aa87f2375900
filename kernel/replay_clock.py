"""A recorded market's time, replayed faster than the wall clock (the demo's spot trace).

Every process given the same values agrees on the trace's moment: `speed` trace seconds pass
per wall second from `trace_start` at the wall moment `epoch`. With a pace file, one process
(the demo) may hold the replay and let it run again, and every other process follows: the
file names the moment of the last change (wall and trace) and whether the trace runs from
there. A replay with an `end` stands still there instead of running off its trace."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from kernel.clock import Clock, SystemClock


@dataclass(frozen=True)
class Pace:
    """From the wall moment `wall`, the trace is at `trace` and runs (or stands) on."""

    wall: datetime
    trace: datetime
    running: bool
    why: str = ""  # what holds it, for the people watching

    def trace_at(self, wall: datetime, speed: float) -> datetime:
        return self.trace + (wall - self.wall) * speed if self.running else self.trace


class PaceFile:
    """The pace as a small JSON file: written whole (a rename), read when it changed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: tuple[int, int, int] | None = None
        self._pace: Pace | None = None

    def write(self, pace: Pace) -> None:
        body = {
            "wall": pace.wall.isoformat(),
            "trace": pace.trace.isoformat(),
            "running": pace.running,
            "why": pace.why,
        }
        draft = self.path.with_suffix(".tmp")
        draft.write_text(json.dumps(body))
        os.replace(draft, self.path)

    def read(self) -> Pace | None:
        """The latest pace; None before the first is written. A file that does not parse (it
        cannot be torn, but may be edited by hand) keeps the last good pace."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return self._pace
        seen = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if seen != self._seen:
            self._seen = seen
            try:
                body = json.loads(self.path.read_text())
                self._pace = Pace(
                    datetime.fromisoformat(body["wall"]),
                    datetime.fromisoformat(body["trace"]),
                    bool(body["running"]),
                    str(body.get("why", "")),
                )
            except (OSError, ValueError, KeyError, TypeError):
                pass
        return self._pace


class ReplayClock:
    """The trace's moment now (the `Clock` port, in trace time); see the module's docstring."""

    def __init__(
        self,
        trace_start: datetime,
        epoch: datetime,
        speed: float,
        wall: Clock | None = None,
        *,
        pace: PaceFile | None = None,
        end: datetime | None = None,
    ) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.trace_start, self.epoch, self.speed, self.end = trace_start, epoch, speed, end
        self._wall = wall or SystemClock()
        self._pace_file = pace
        self._latest = trace_start

    def pace(self) -> Pace:
        """The pace in force: the file's, or the steady one from `epoch`."""
        paced = self._pace_file.read() if self._pace_file is not None else None
        return paced or Pace(self.epoch, self.trace_start, running=True)

    def now(self) -> datetime:
        moment = self.pace().trace_at(self._wall.now(), self.speed)
        if self.end is not None:
            moment = min(moment, self.end)
        # Never back: a process that read the pace just before a hold saw a little more.
        self._latest = max(self._latest, moment)
        return self._latest

    def monotonic(self) -> float:
        return self._wall.monotonic() * self.speed

    def wall_seconds(self, trace_seconds: float) -> float:
        """How long `trace_seconds` of the trace take on the wall clock while it runs."""
        return trace_seconds / self.speed

    async def sleep(self, seconds: float) -> None:
        await self._wall.sleep(seconds / self.speed)
