"""The demo paces the replayed market by its fleet, not only by the wall clock.

At 240x a zone's spot capacity lasts a few wall seconds: less than a worker on a loaded laptop
needs to start, say hello and load its model. Run on the wall clock alone, every interruption
hit a booting worker and the demo never showed a checkpoint and a resume; with short jobs, the
market ran its capacity changes while nothing ran on spot and no job was interrupted. So the
market moves while a job renders on a spot instance, the only time its changes tell a story,
whatever boots meanwhile (on an idle machine a warm render lasts seconds, and a market held for
every boot never met a render). While none does, it is held while some instance boots
(launched, its worker not yet said hello), while some job was given to a worker that has not
started it, and through a lull between jobs. Every hold has a bound, so a worker that never
comes up, or jobs waiting for capacity the held market would never bring, cannot stop it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from kernel.clock import Clock
from kernel.job_record import JobRecord, Placement
from kernel.job_state import JobState
from kernel.market import Market
from kernel.replay_clock import Pace, PaceFile, ReplayClock
from orchestrator.store.cost_facts import InstanceLife

RENDERING = frozenset({JobState.RUNNING, JobState.CHECKPOINTING})


@dataclass(frozen=True)
class HoldBounds:
    boot: timedelta = timedelta(seconds=90)  # an instance is booting at most this long
    start: timedelta = timedelta(seconds=60)  # a job given to a worker, not yet started
    # No job on spot: the market waits this long, a lull between jobs; longer, jobs that wait
    # for spot capacity (which only a moving market brings back) wait out the whole hold.
    idle: timedelta = timedelta(seconds=10)


def spot_work(lives: Sequence[InstanceLife], placements: Sequence[Placement]) -> bool:
    """Whether some job renders on a live spot instance (the work an interruption would hit,
    and a notice would checkpoint). From the store's placements: a job record read in bulk
    does not carry its worker."""
    spot = {
        life.instance_id for life in lives if life.ended_at is None and life.pool[2] is Market.SPOT
    }
    return any(
        placement.worker_id in spot and placement.job.state in RENDERING for placement in placements
    )


@dataclass
class IdleHold:
    """Holds the market while no job runs on spot, for at most `bound` at a time: then it
    runs (capacity the jobs wait for may come back) until spot work starts again."""

    bound: timedelta = HoldBounds.idle
    since: datetime | None = None

    def reason(self, working: bool, now: datetime) -> str | None:
        if working:
            self.since = None
            return None
        if self.since is None:
            self.since = now
        return "no job runs on spot" if now - self.since < self.bound else None


def hold_reason(
    lives: Sequence[InstanceLife],
    jobs: Sequence[JobRecord],
    now: datetime,
    bounds: HoldBounds = HoldBounds(),
) -> str | None:
    """Why the market waits now (None: it runs)."""
    booting = sum(
        1
        for life in lives
        if life.ended_at is None and life.ready_at is None and now - life.launched_at < bounds.boot
    )
    starting = sum(
        1 for job in jobs if job.state is JobState.ASSIGNED and now - job.updated_at < bounds.start
    )
    reasons = []
    if booting:
        reasons.append(f"{booting} instance(s) booting")
    if starting:
        reasons.append(f"{starting} job(s) starting")
    return ", ".join(reasons) or None


class ReplayPacer:
    """Writes the pace the demo's processes read (their replay clocks share `pace_file`)."""

    def __init__(self, pace_file: PaceFile, replay: ReplayClock, wall: Clock) -> None:
        self._file, self._replay, self._wall = pace_file, replay, wall
        self.held_seconds = 0.0  # wall seconds the market stood still for the fleet
        self._held_since: datetime | None = None

    def hold_from_the_start(self, why: str) -> None:
        """Before any process reads the pace: the market waits from its first moment."""
        self._held_since = self._replay.epoch
        self._file.write(Pace(self._replay.epoch, self._replay.trace_start, False, why))

    @property
    def why(self) -> str:
        return self._replay.pace().why

    def update(self, reason: str | None) -> None:
        """Hold the market for `reason`, or let it run (None); a change is written once."""
        current = self._replay.pace()
        running = reason is None
        if current.running == running and current.why == (reason or ""):
            return
        now = self._wall.now()
        trace = self._replay.now()  # the moment the change happens at, on the old pace
        if self._held_since is not None:
            self.held_seconds += (now - self._held_since).total_seconds()
        self._held_since = None if running else now
        self._file.write(Pace(now, trace, running, reason or ""))


def pace_reason(
    lives: Sequence[InstanceLife],
    jobs: Sequence[JobRecord],
    placements: Sequence[Placement],
    now: datetime,
    idle: IdleHold,
    bounds: HoldBounds = HoldBounds(),
) -> str | None:
    """Why the market waits now (None: it runs). It runs while a job renders on spot, whatever
    else boots or starts meanwhile: on a fast machine renders last seconds, and a market held
    for every boot never reached a loss while one ran. Otherwise it waits for booting
    instances, starting jobs and a lull between jobs, each within its bound."""
    working = spot_work(lives, placements)
    lull = idle.reason(working, now)
    if working:
        return None
    return hold_reason(lives, jobs, now, bounds) or lull
