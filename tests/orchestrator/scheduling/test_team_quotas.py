"""Team quotas and fair share: a team runs its nominal share of GPUs, borrows what other teams
leave idle, and a team within its share takes borrowed GPUs back through a checkpoint, whatever
the borrower's priority; a job its quota holds back waits with the reason, in the store, the
CLI's `job` and the API, and gets no GPU bought for it (on SQLite and PostgreSQL)."""

from __future__ import annotations

import io
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from autoscaler.demand import StoreDemand
from framefleet.cli import show_job
from kernel.clock import FakeClock
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.worker_protocol import Channel, EventKind, topic
from orchestrator.control.refusals import RefusedMessages
from orchestrator.control.service import ControlPlaneService
from orchestrator.control.settings import ControlSettings
from orchestrator.costs.ledger import CostLedger
from orchestrator.scheduling.policy import schedule
from orchestrator.scheduling.quotas import TeamQuota
from orchestrator.scheduling.snapshots import (
    GpuSlot,
    PendingJob,
    RunningJob,
    SchedulerSettings,
    WorkerSnapshot,
)
from orchestrator.store.job_store import JobStore
from simulator.fakes import MemoryLink
from tests.support.control_plane import WORKERS, hello, plane_in_memory, preempted, started
from tests.support.fleet_history import FleetHistory
from tests.support.jobs import job_dict

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
ONE_EACH = {"research": TeamQuota({"*": 1}), "ads": TeamQuota({"*": 1})}


def pending(job_id: str, team: str | None, priority: int = 5) -> PendingJob:
    return PendingJob(job_id, priority, None, NOW, 16.0, team=team)


def gpus(*running: RunningJob | None) -> list[WorkerSnapshot]:
    return [
        WorkerSnapshot(f"w{n}", (GpuSlot(f"w{n}", 0, "l4", 24.0, job),))
        for n, job in enumerate(running)
    ]


def runs(job_id: str, team: str | None, priority: int = 5) -> RunningJob:
    return RunningJob(job_id, priority, None, NOW - timedelta(minutes=5), team=team)


def test_a_team_borrows_idle_share_and_waits_when_none_is_idle() -> None:
    rules = SchedulerSettings(quotas=ONE_EACH)
    # research's share is idle: ads runs its own and borrows research's.
    decided = schedule([pending("a1", "ads"), pending("a2", "ads")], gpus(None, None), NOW, rules)
    assert sorted(a.job_id for a in decided.assignments) == ["a1", "a2"]
    # Without borrowing, the second waits, and says why.
    strict = replace(rules, quotas={**ONE_EACH, "ads": TeamQuota({"*": 1}, borrow=False)})
    decided = schedule([pending("a1", "ads"), pending("a2", "ads")], gpus(None, None), NOW, strict)
    assert [a.job_id for a in decided.assignments] == ["a1"]
    [wait] = decided.waits
    assert wait.job_id == "a2"
    assert wait.reason == "quota: team ads runs 1 of its 1 * GPUs in use, may not borrow"


def test_a_team_within_its_share_reclaims_a_borrowed_gpu_whatever_its_priority() -> None:
    rules = SchedulerSettings(quotas=ONE_EACH)
    fleet = gpus(runs("a1", "ads", priority=9), runs("a2", "ads", priority=9))
    decided = schedule([pending("r1", "research", priority=1)], fleet, NOW, rules)
    [reclaim] = decided.preemptions
    assert reclaim.for_job_id == "r1"
    assert reclaim.victim_job_id in {"a1", "a2"}
    assert "team research reclaims its share" in reclaim.reason
    # A team running within its own share is never reclaimed from (priority preemption
    # aside, which needs the usual margin).
    decided = schedule([pending("r1", "research")], gpus(runs("a1", "ads")), NOW, rules)
    assert decided.preemptions == ()


teams = st.sampled_from(["research", "ads", "video", None])


@settings(max_examples=300, deadline=None)
@given(
    running=st.lists(st.one_of(st.none(), st.tuples(teams, st.integers(0, 9))), max_size=8),
    queued=st.lists(st.tuples(teams, st.integers(0, 9)), max_size=12),
    shares=st.tuples(st.integers(0, 3), st.integers(0, 3), st.booleans()),
)
def test_no_team_passes_its_share_unless_it_borrows_an_idle_one(
    running: list[tuple[str | None, int] | None],
    queued: list[tuple[str | None, int]],
    shares: tuple[int, int, bool],
) -> None:
    research, ads, ads_borrows = shares
    quotas = {"research": TeamQuota({"*": research}), "ads": TeamQuota({"*": ads}, ads_borrows)}
    fleet = gpus(*(runs(f"r{n}", *job) if job else None for n, job in enumerate(running)))
    jobs = [pending(f"q{n}", *job) for n, job in enumerate(queued)]
    decided = schedule(jobs, fleet, NOW, SchedulerSettings(quotas=quotas))
    team_of = {j.job_id: j.team for j in jobs} | {
        job.job_id: job.team for w in fleet for g in w.gpus if (job := g.running)
    }
    after: dict[str | None, int] = {}
    victims = {p.victim_job_id for p in decided.preemptions}
    for job_id, team in team_of.items():
        holds = job_id.startswith("r") and job_id not in victims
        gets = job_id in {a.job_id for a in decided.assignments} | {
            p.for_job_id for p in decided.preemptions
        }
        after[team] = after.get(team, 0) + (holds or gets)
    before_ads = sum(1 for job in running if job and job[0] == "ads")
    if not ads_borrows:  # a team that may not borrow never grows past its share
        assert after.get("ads", 0) <= max(ads, before_ads)
    # A team borrows at most what the other teams' shares hold.
    for team in ("research", "ads"):
        ran = sum(1 for job in running if job and job[0] == team)
        assert after.get(team, 0) <= max(research + ads, ran)
    granted = [a.job_id for a in decided.assignments] + [p.for_job_id for p in decided.preemptions]
    for p in decided.preemptions:  # reclaims take only from teams past their share
        if "reclaims" in p.reason:
            victim_team = team_of[p.victim_job_id]
            share = {"research": research, "ads": ads}.get(victim_team or "", 0)
            ran = sum(1 for job in running if job and job[0] == victim_team)
            ran += sum(1 for job_id in granted if team_of[job_id] == victim_team)
            assert ran > share


def submit(store: JobStore, job_id: str, team: str, priority: int = 5) -> None:
    spec = job_dict(job_id, priority=priority, tags={"team": team})
    store.intake.accept_batch([Submission(parse_job(spec, now=None), f"m-{job_id}")])


async def test_a_team_over_its_share_waits_while_its_borrowed_gpu_is_reclaimed(
    store: JobStore, clock: FakeClock
) -> None:
    rules = ControlSettings(scheduler=SchedulerSettings(quotas=ONE_EACH))
    plane, _ = plane_in_memory(store, clock)
    plane._settings = rules  # the control plane as `control.scheduling.team_quotas` sets it
    plane._scheduling._settings = rules
    for worker_id in WORKERS:
        await plane.on_message(topic(worker_id, Channel.HELLO), hello(worker_id, clock))
    submit(store, "ads-1", "ads", priority=9)
    submit(store, "ads-2", "ads", priority=9)
    await plane.tick()  # research's share is idle: ads borrows it
    for job_id in ("ads-1", "ads-2"):
        await started(plane, store, job_id)

    submit(store, "research-1", "research", priority=1)
    submit(store, "ads-3", "ads", priority=9)
    clock.advance(1)
    await plane.tick()
    checkpointing = [j for j in ("ads-1", "ads-2") if store.get(j).state is JobState.CHECKPOINTING]
    assert len(checkpointing) == 1  # one borrowed GPU is taken back, through a checkpoint
    waiting = store.get("ads-3")
    assert waiting.state is JobState.QUEUED
    assert waiting.wait_reason is not None
    assert waiting.wait_reason == "quota: team ads runs 1 of its 1 * GPUs in use, no share is idle"
    assert "ads-3" not in {job.job_id for job in StoreDemand(store).queued(clock.now())}
    shown = io.StringIO()
    show_job(store, "ads-3", Console(file=shown, width=200))
    assert "waiting for: quota: team ads runs 1 of its 1 * GPUs" in shown.getvalue()

    [victim] = checkpointing
    freed_on = store.get(victim).worker_id
    await preempted(plane, store, victim)
    clock.advance(1)
    await plane.tick()
    research = store.get("research-1")
    assert (research.state, research.worker_id) == (JobState.ASSIGNED, freed_on)
    assert research.wait_reason is None
    assert store.get(victim).state is JobState.QUEUED  # resumes from its checkpoint later
    assert store.get(victim).wait_reason is not None  # ads is at its share again


def test_a_team_past_its_spend_per_day_waits_and_the_others_run() -> None:
    quotas = {"ads": TeamQuota({"*": 4}, spend_per_day=10.0), "research": TeamQuota({"*": 4})}
    jobs = [pending("a1", "ads"), pending("r1", "research")]
    decided = schedule(jobs, gpus(None, None), NOW, SchedulerSettings(quotas=quotas), {"ads": 12.5})
    assert [a.job_id for a in decided.assignments] == ["r1"]
    [wait] = decided.waits
    assert (wait.job_id, wait.reason) == ("a1", "quota: team ads spent $12.50 of its $10.00 today")


async def test_the_spend_per_day_is_read_from_the_teams_cost_today(
    store: JobStore, clock: FakeClock
) -> None:
    """The ledger's lines of each team's jobs today, as the control plane reads them."""
    fleet = FleetHistory(store, clock)
    assert clock.now().hour == 0  # the fixture's midnight: the work below is all today's
    fleet.price(Decimal("0.918"))
    instance = fleet.launch()
    for job_id, team in (("vfx-1", "vfx"), ("ads-1", "ads")):
        fleet.submit(job_id, tags={"team": team})
    fleet.ready(instance)
    fleet.assign("ads-1", instance)
    fleet.event("ads-1", EventKind.STARTED)
    fleet.advance(1800)
    fleet.finish("ads-1", model_load_seconds=60.0)
    spent = CostLedger(store.cost_facts, clock).spent_today_by_team()
    assert set(spent) == {"ads"}  # vfx's job has not run: it cost nothing yet
    assert spent["ads"] > 0
    # The control plane holds back the team past its limit, with the reason.
    limit = spent["ads"] / 2
    quotas = {"ads": TeamQuota({"*": 8}, spend_per_day=limit)}
    rules = ControlSettings(scheduler=SchedulerSettings(quotas=quotas))
    plane = ControlPlaneService(
        store,
        clock,
        rules,
        connect=lambda _deliver, _admit: MemoryLink(),
        refusals=RefusedMessages(clock, None),
        team_spend=CostLedger(store.cost_facts, clock).spent_today_by_team,
    )
    await plane.on_message(topic(WORKERS[0], Channel.HELLO), hello(WORKERS[0], clock))
    submit(store, "more-ads", "ads")
    await plane.tick()
    waiting = store.get("more-ads")
    assert waiting.state is JobState.QUEUED
    assert waiting.wait_reason is not None
    assert waiting.wait_reason.startswith("quota: team ads spent $")
