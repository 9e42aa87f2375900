"""The demo paces the replayed market by its fleet, not only by the wall clock.

At 240x a zone's spot capacity lasts a few wall seconds: less than a worker on a loaded laptop
needs to start, say hello and load its model. Run on the wall clock alone, every interruption
hit a booting worker and the demo never showed a checkpoint and a resume; with short jobs, the
market ran its capacity changes while nothing ran on spot and no job was interrupted. So the
market moves while a job renders on a spot instance, the only time its changes tell a story,
whatever boots meanwhile (on an idle machine a warm render lasts seconds, and a market held for
every boot never met a render). While none does, it is held while some instance boots
(launched, its worker not yet said hello), while some job was given to a worker that has not
started it, and through a lull between jobs. And it reaches a capacity loss only where a spot
job renders in that zone with most of its work ahead: one that started (or checkpointed)
moments ago with less than half its steps behind it. A loss that met only idle instances, or a
render about to finish (its notice came 0.3 s before the job's last step), told no story; so
the market stands just before the loss until such a render runs there. Every hold has a
bound, so a worker that never comes up, or jobs waiting for capacity the held market would
never bring, cannot stop it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from autoscaler.market.trace import Trace
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
    # The next capacity loss waits this long (wall) for a render in its zone, until a notice
    # has reached an instance running a job (then the demo has told its story and runs on).
    story: timedelta = timedelta(seconds=30)
    # How far ahead (wall, at the market's speed) a loss is looked for: past two refreshes of
    # the demo's view, which is when the pace is next decided.
    lead: timedelta = timedelta(seconds=2)
    # A render started or checkpointed this recently (wall), with less than half its steps
    # behind it, has work a notice will interrupt.
    fresh: timedelta = timedelta(seconds=2)


@dataclass(frozen=True)
class NextLoss:
    """The trace's next capacity loss: where, and the trace moment it comes at."""

    zone: str
    instance_type: str
    at: datetime


def next_loss(trace: Trace, after: datetime) -> NextLoss | None:
    """The first tick after `after` at which some zone's spot capacity goes."""
    first = trace.tick_at(after)
    if first is None:
        return None
    for tick in range(first + 1, trace.ticks):
        for zone in sorted(trace.zones.values(), key=lambda z: z.zone):
            if zone.available[tick - 1] == 1 and zone.available[tick] == 0:
                return NextLoss(zone.zone, zone.instance_type, trace.start + trace.gap * tick)
    return None


def fresh_render_in(
    zone: str,
    lives: Sequence[InstanceLife],
    placements: Sequence[Placement],
    now: datetime,
    bounds: HoldBounds = HoldBounds(),
) -> bool:
    """Whether a job renders on a live spot instance in `zone` with most of its work ahead."""
    there = {
        life.instance_id
        for life in lives
        if life.ended_at is None and life.pool[1] == zone and life.pool[2] is Market.SPOT
    }
    return any(
        p.worker_id in there
        and p.job.state in RENDERING
        and now - p.job.updated_at <= bounds.fresh
        and p.job.checkpoint_step * 2 < p.job.spec.steps
        for p in placements
    )


def imminent(
    trace: Trace, trace_now: datetime, speed: float, bounds: HoldBounds = HoldBounds()
) -> NextLoss | None:
    """The next capacity loss if the market would reach it before the pace is next decided."""
    loss = next_loss(trace, trace_now)
    if loss is None or loss.at - trace_now > bounds.lead * speed:
        return None
    return loss


@dataclass
class StoryHold:
    """Holds the market just before its next capacity loss until a render runs in that
    zone with work ahead (for at most `bounds.story` per loss), until the story is told: a
    notice has reached an instance running a job (the fleet's timeline says so, `told`). Not
    before: the render the market was let go for may end, or be preempted for a more urgent
    job, in the moment before its notice comes."""

    bounds: HoldBounds = HoldBounds()
    told: bool = False
    loss: NextLoss | None = None
    since: datetime | None = None

    def reason(self, coming: NextLoss | None, ready: bool, now: datetime) -> str | None:
        if coming is None or self.told:
            return None
        if coming != self.loss:
            self.loss, self.since = coming, now
        if ready:
            return None
        assert self.since is not None
        if now - self.since >= self.bounds.story:
            return None
        return f"the capacity loss in {coming.zone} waits for a render there"


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
    story: StoryHold | None = None,
    coming: NextLoss | None = None,
) -> str | None:
    """Why the market waits now (None: it runs). Just before a capacity loss (`coming`) it
    waits for a render with work ahead in that zone (`StoryHold`). Else it runs while a job
    renders on spot, whatever else boots or starts meanwhile: on a fast machine renders last
    seconds, and a market held for every boot never reached a loss while one ran. Otherwise it
    waits for booting instances, starting jobs and a lull between jobs, each within its
    bound."""
    bounds = story.bounds if story is not None else HoldBounds()
    if story is not None and coming is not None:
        ready = fresh_render_in(coming.zone, lives, placements, now, bounds)
        waiting = story.reason(coming, ready, now)
        if waiting is not None:
            return waiting
    working = spot_work(lives, placements)
    lull = idle.reason(working, now)
    if working:
        return None
    return hold_reason(lives, jobs, now, bounds) or lull
