"""The demo paces its replayed market by the fleet: a hold stops the trace's clock in every
process that shares the pace file, a release runs it on from where it stood, and the replay
never runs past its trace. Interruptions: the first worker reclaimed while it runs a job gets a
notice; the ones without come after it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from autoscaler.ec2.fake import FakeEc2
from framefleet.demo_pace import (
    HoldBounds,
    IdleHold,
    ReplayPacer,
    StoryHold,
    hold_reason,
    imminent,
    next_loss,
    pace_reason,
)
from framefleet.demo_report import read_timeline
from framefleet.local_fleet import LocalFleet, LocalFleetSettings, Timeline
from framefleet.spot_replay import ReplaySettings, SpotReplay
from kernel.clock import FakeClock
from kernel.job_record import JobRecord
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.market import Market
from kernel.replay_clock import Pace, PaceFile, ReplayClock
from kernel.worker_protocol import EventKind
from orchestrator.store.cost_facts import InstanceLife, PoolKey
from orchestrator.store.job_store import JobStore
from tests.support.fleet_history import FleetHistory
from tests.support.jobs import job_dict
from tests.support.replay import GAP, UP, RecordedEvents, launch, trace

START = datetime(2023, 3, 1, tzinfo=UTC)
SPEED = 100.0


def clocks(tmp_path: Path, wall: FakeClock, end: datetime | None = None) -> list[ReplayClock]:
    """Two processes' replay clocks over one pace file."""
    return [
        ReplayClock(START, wall.now(), SPEED, wall, pace=PaceFile(tmp_path / "pace"), end=end)
        for _ in range(2)
    ]


def test_a_hold_stops_every_processs_replay_and_a_release_runs_it_on(tmp_path: Path) -> None:
    wall = FakeClock()
    demo, autoscaler = clocks(tmp_path, wall)
    pacer = ReplayPacer(PaceFile(tmp_path / "pace"), demo, wall)
    wall.advance(2)
    pacer.update("1 instance(s) booting")
    held_at = START + timedelta(seconds=200)
    wall.advance(30)
    assert demo.now() == autoscaler.now() == held_at
    assert pacer.why == "1 instance(s) booting"
    pacer.update(None)
    wall.advance(1)
    assert demo.now() == autoscaler.now() == held_at + timedelta(seconds=100)
    assert pacer.held_seconds == 30


def test_a_clock_never_goes_back_across_a_hold(tmp_path: Path) -> None:
    wall = FakeClock()
    reader = clocks(tmp_path, wall)[0]
    wall.advance(5)
    seen = reader.now()
    # The pacer's hold names an earlier trace moment (it read the pace a little before).
    PaceFile(tmp_path / "pace").write(Pace(wall.now(), START, running=False, why="booting"))
    assert reader.now() == seen


def test_the_replay_stands_still_at_its_end(tmp_path: Path) -> None:
    wall = FakeClock()
    end = START + timedelta(hours=1)
    replay = clocks(tmp_path, wall, end=end)[0]
    wall.advance(3600)  # 100 trace hours
    assert replay.now() == end


def test_a_pace_file_that_does_not_parse_keeps_the_last_good_pace(tmp_path: Path) -> None:
    wall = FakeClock()
    replay = clocks(tmp_path, wall)[0]
    PaceFile(tmp_path / "pace").write(Pace(wall.now(), START, running=False))
    assert replay.now() == START
    (tmp_path / "pace").write_text(json.dumps({"wall": "yesterday"}))
    wall.advance(10)
    assert replay.now() == START


def life(instance_id: str, launched: datetime, ready: datetime | None) -> InstanceLife:
    pool: PoolKey = ("p3.2xlarge", "us-east-1a", Market.SPOT)
    return InstanceLife(instance_id, pool, launched, 1, "v100", ready, None, None, None)


def job(state: JobState, updated: datetime) -> JobRecord:
    spec = parse_job(job_dict("j"), now=None)
    return JobRecord("j", state, 1, 1, 5, None, spec, updated, updated)


def test_the_market_waits_for_booting_instances_and_starting_jobs_within_bounds() -> None:
    now = START + timedelta(hours=1)
    bounds = HoldBounds(boot=timedelta(seconds=90), start=timedelta(seconds=60))
    ready = life("i-1", now - timedelta(seconds=30), now - timedelta(seconds=10))
    booting = life("i-2", now - timedelta(seconds=30), None)
    never_up = life("i-3", now - timedelta(seconds=91), None)
    assert hold_reason([ready], [], now, bounds) is None
    assert hold_reason([ready, booting], [], now, bounds) == "1 instance(s) booting"
    assert hold_reason([never_up], [], now, bounds) is None  # a hold never outlasts its bound
    starting = job(JobState.ASSIGNED, now - timedelta(seconds=5))
    assert hold_reason([booting], [starting], now, bounds) == (
        "1 instance(s) booting, 1 job(s) starting"
    )
    assert hold_reason([], [job(JobState.ASSIGNED, now - timedelta(seconds=61))], now) is None
    assert hold_reason([], [job(JobState.RUNNING, now)], now, bounds) is None


def test_the_market_runs_while_a_job_renders_on_spot_and_waits_for_boots_otherwise(
    store: JobStore, clock: FakeClock
) -> None:
    # Read from the store's placements: the demo read bulk job records, which carry no
    # worker, never saw spot work, and an unloaded run's market stood still until the end.
    fleet = FleetHistory(store, clock)
    spot, on_demand = fleet.launch(Market.SPOT), fleet.launch(Market.ON_DEMAND)
    fleet.ready(spot)
    fleet.ready(on_demand)
    fleet.submit("on-spot")
    fleet.submit("on-demand")
    fleet.assign("on-demand", on_demand)
    fleet.event("on-demand", EventKind.STARTED)
    clock.advance(10)
    booting = fleet.launch(Market.SPOT, zone="us-east-1c")
    idle = IdleHold()

    def reason() -> str | None:
        now = clock.now()
        lives = store.cost_facts.instance_lives(START, now + timedelta(seconds=1))
        return pace_reason(lives, store.list_jobs(), store.placements(), now, idle)

    assert reason() == "1 instance(s) booting"  # work on on-demand only: nothing to interrupt
    fleet.assign("on-spot", spot)
    assert reason() == "1 instance(s) booting, 1 job(s) starting"  # its render not begun
    fleet.event("on-spot", EventKind.STARTED)
    assert reason() is None  # a job renders on spot: the market runs, boots or not
    fleet.end(spot)
    clock.advance(10)
    assert reason() == "1 instance(s) booting"  # an ended instance renders no more
    fleet.ready(booting)
    assert reason() == "no job runs on spot"  # a lull, within its bound
    clock.advance(HoldBounds().idle.total_seconds() + 1)
    assert reason() is None


class Busy:
    def __init__(self, instance_ids: set[str]) -> None:
        self.instance_ids = instance_ids

    def running_a_job(self, instance_id: str) -> bool:
        return instance_id in self.instance_ids


async def test_the_first_worker_reclaimed_at_work_gets_a_notice_the_silent_ones_follow(
    tmp_path: Path,
) -> None:
    wall = FakeClock()
    replay = ReplayClock(START, wall.now(), SPEED, wall)
    ec2 = FakeEc2(wall)
    # Three spot instances in the zone that loses its capacity at tick 2; two of them at work.
    idle = (await ec2.launch(launch((UP,)))).instances[0].instance_id
    working = [(await ec2.launch(launch((UP,)))).instances[0].instance_id for _ in range(2)]
    timeline = Timeline(tmp_path / "timeline.jsonl", wall)
    fleet = LocalFleet(ec2, LocalFleetSettings("demo", tmp_path, timeline.path), wall, timeline)
    busy = Busy(set(working))
    spot = SpotReplay(
        fleet, ec2, RecordedEvents(), trace(), replay, wall, ReplaySettings(4.0, 3), busy
    )
    for _ in range(3):  # ticks 0, 1, 2
        await spot.on_poll({i.instance_id: i for i in await ec2.describe("demo")})
        wall.advance(1)
    await spot.notices_run_out()
    entries = read_timeline(timeline.path)
    notices = [(e["instance_id"], e["busy"]) for e in entries if e["kind"] == "spot_notice"]
    silent = [
        (e["instance_id"], e["busy"])
        for e in entries
        if e["kind"] == "spot_reclaimed" and not e["notice"]
    ]
    # The idle one was listed first; those at work go first: the first gets its notice and
    # checkpoints, the next dies without one, the idle one gets a notice.
    assert notices == [(working[0], True), (idle, False)]
    assert silent == [(working[1], True)]
    assert spot.interruptions == 3


def test_the_market_can_wait_from_its_first_moment(tmp_path: Path) -> None:
    wall = FakeClock()
    demo, autoscaler = clocks(tmp_path, wall)
    ReplayPacer(PaceFile(tmp_path / "pace"), demo, wall).hold_from_the_start("starting")
    wall.advance(30)
    assert demo.now() == autoscaler.now() == START


def test_the_next_capacity_loss_comes_only_where_a_render_has_its_work_ahead(
    store: JobStore, clock: FakeClock
) -> None:
    # Issue 46, item 9: an idle demo missed its story one run in three: a notice came 0.3 s
    # before the last job's last step, or only to idle instances.
    replayed = trace()  # us-east-1a loses its capacity at tick 2
    loss = next_loss(replayed, START)
    assert loss is not None
    assert (loss.zone, loss.at) == ("us-east-1a", START + GAP * 2)
    assert imminent(replayed, START, SPEED / 2) is None  # 200 trace s ahead, past the lead
    coming = imminent(replayed, START + GAP * 2 - timedelta(seconds=150), SPEED)
    assert coming == loss

    fleet = FleetHistory(store, clock)
    elsewhere, there = fleet.launch(zone="us-east-1c"), fleet.launch(zone="us-east-1a")
    fleet.ready(elsewhere)
    fleet.ready(there)
    fleet.submit("far", steps=8)
    fleet.assign("far", elsewhere)
    fleet.event("far", EventKind.STARTED)
    idle, story = IdleHold(), StoryHold()

    def reason() -> str | None:
        now = clock.now()
        lives = store.cost_facts.instance_lives(START, now + timedelta(seconds=1))
        jobs, placements = store.list_jobs(), store.placements()
        return pace_reason(lives, jobs, placements, now, idle, story, coming)

    waits = "the capacity loss in us-east-1a waits for a render there"
    assert reason() == waits  # a render in another zone: the loss would hit an idle instance
    fleet.submit("late", steps=8)
    fleet.assign("late", there)
    fleet.event("late", EventKind.STARTED)
    fleet.checkpoint("late", 6, 0.1)  # three quarters done: its notice may come after its end
    assert reason() == waits
    again = fleet.launch(zone="us-east-1a")
    fleet.ready(again)
    fleet.submit("ahead", steps=8)
    fleet.assign("ahead", again)
    fleet.event("ahead", EventKind.STARTED)
    assert reason() is None  # its whole render ahead of it: the loss may come


def test_a_loss_waits_for_a_fresh_render_within_its_bound_and_only_until_told(
    store: JobStore, clock: FakeClock
) -> None:
    coming = imminent(trace(), START + GAP * 2 - timedelta(seconds=150), SPEED)
    fleet = FleetHistory(store, clock)
    there = fleet.launch(zone="us-east-1a")
    fleet.ready(there)
    idle, story = IdleHold(), StoryHold()

    def reason() -> str | None:
        now = clock.now()
        lives = store.cost_facts.instance_lives(START, now + timedelta(seconds=1))
        return pace_reason(lives, store.list_jobs(), store.placements(), now, idle, story, coming)

    waits = "the capacity loss in us-east-1a waits for a render there"
    assert reason() == waits
    fleet.submit("long", steps=8)
    fleet.assign("long", there)
    fleet.event("long", EventKind.STARTED)
    assert reason() is None  # just started there, all its steps ahead: the loss may come
    clock.advance(HoldBounds().fresh.total_seconds() + 1)
    # The loss has not come yet and the render is no longer fresh (it may end, or be preempted
    # for a more urgent job, before its notice): the market waits again, within its bound.
    assert reason() == waits
    clock.advance(HoldBounds().story.total_seconds())
    assert reason() is None  # never longer than its bound
    story.told = True  # the fleet's timeline shows a notice on an instance running a job
    assert story.reason(coming, False, clock.now()) is None  # no more holds
