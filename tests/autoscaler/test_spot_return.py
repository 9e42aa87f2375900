"""Back to spot: a job the safety net sent to on-demand moves to spot again once its deadline
can take an interruption and the move saves more than it risks, in two steps (buy spot while
the job runs on; drain the on-demand instance once the spot one has booted)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from autoscaler.deadline import choose_market
from autoscaler.policy import plan
from autoscaler.snapshot import InstanceView, Launch, PlanInput, PurchaseSettings, RunningDemand
from autoscaler.spot_return import ready_to_move, spot_launches
from kernel.market import Market
from tests.support.market_snapshots import MARKET, NOW, ON_DEMAND, SETTINGS, SPOT_A, SPOT_B, job
from tests.support.paces import linear_pace

ON_DEMAND_BOX = InstanceView(
    "i-od", ON_DEMAND.pool, 1.861, NOW - timedelta(hours=1), 1, busy_gpus=1, unsaved_work=True
)


def running(deadline_in: timedelta | None, steps: int = 6000) -> RunningDemand:
    return RunningDemand(job("j", deadline_in=deadline_in, steps=steps), "i-od")


def launches_for(
    job_running: RunningDemand,
    instances: tuple[InstanceView, ...] = (ON_DEMAND_BOX,),
    settings: PurchaseSettings = SETTINGS,
) -> list[Launch]:
    state = PlanInput(NOW, (), instances, MARKET)
    return spot_launches(state, [job_running], settings, linear_pace(), choose_market)


def test_a_job_with_slack_again_gets_a_spot_instance_while_it_runs_on() -> None:
    (launch,) = launches_for(running(deadline_in=timedelta(hours=12)))
    assert launch.pool == SPOT_A.pool
    assert launch.job_ids == ("j",)
    assert "back to spot from on-demand i-od" in launch.reason
    assert "saves about $" in launch.reason


def test_no_move_when_the_deadline_could_not_take_an_interruption() -> None:
    # 6000 steps at ~2 s: 3.3 h of work; 3.5 h to the deadline leaves no interruption's slack.
    assert launches_for(running(deadline_in=timedelta(hours=3.5))) == []


def test_no_move_when_little_work_is_left() -> None:
    """A few minutes of work left: a new start-up costs more than the move saves."""
    assert launches_for(running(deadline_in=None, steps=100)) == []


def test_no_move_off_a_shared_instance_or_a_spot_one_or_when_off() -> None:
    shared = replace(ON_DEMAND_BOX, gpus=4, busy_gpus=2)
    assert launches_for(running(None), (shared,)) == []
    on_spot = replace(ON_DEMAND_BOX, pool=SPOT_B.pool)
    assert launches_for(running(None), (on_spot,)) == []
    strict = replace(SETTINGS, return_to_spot_margin_hours=1000)
    assert launches_for(running(None), settings=strict) == []


def test_the_on_demand_instance_is_drained_once_the_spot_one_has_booted() -> None:
    job_running = running(None)
    booting = InstanceView("i-spot", SPOT_A.pool, 0.70, NOW - timedelta(seconds=60), 1)
    state = PlanInput(NOW, (), (ON_DEMAND_BOX, booting), MARKET)
    held = {"j": "i-spot"}
    assert ready_to_move(state, [job_running], held, SETTINGS) == []  # still booting
    booted = replace(booting, launched_at=NOW - timedelta(seconds=SETTINGS.boot_seconds))
    state = replace(state, instances=(ON_DEMAND_BOX, booted))
    (move,) = ready_to_move(state, [job_running], held, SETTINGS)
    assert move.instance_id == "i-od"
    assert "moves to spot instance i-spot" in move.reason
    taken = replace(booted, busy_gpus=1)  # another job took the GPU after all: no move
    state = replace(state, instances=(ON_DEMAND_BOX, taken))
    assert ready_to_move(state, [job_running], held, SETTINGS) == []


def test_a_gpu_held_for_a_move_is_neither_given_away_nor_scaled_in() -> None:
    long_ago = NOW - timedelta(hours=1)
    held = InstanceView("i-spot", SPOT_A.pool, 0.70, long_ago, 1, idle_since=long_ago)
    state = PlanInput(NOW, (job("queued"),), (held,), MARKET, moving_to_spot={"i-spot": "j"})
    decided = plan(state, SETTINGS, linear_pace())
    assert decided.placed == ()
    assert decided.terminations == ()
    assert [launch.pool.market for launch in decided.launches] == [Market.SPOT]
