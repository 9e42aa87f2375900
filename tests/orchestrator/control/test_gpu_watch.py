"""The stall bound, the sick-GPU rules, and the control plane's watch over progress and NVML
health (a fake clock, an in-memory fault book and the real worker registry)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from kernel.clock import FakeClock
from kernel.fleet_facts import GpuFault, GpuFaultKind
from kernel.job_record import Placement
from kernel.job_state import JobState
from kernel.market import Market
from kernel.stall import StallRule, expected_step
from kernel.worker_protocol import GpuHealth, GpuInfo, Heartbeat, Hello, JobProgress
from orchestrator.control.gpu_watch import GpuWatch, Quarantine, WatchSettings
from orchestrator.scheduling.gpu_health import SickRule, errors_in, quarantine_reason, too_slow
from orchestrator.scheduling.registry import WorkerRegistry
from tests.support.jobs import record

START = datetime(2026, 12, 1, tzinfo=UTC)


def health(ecc: int | None = 0, xids: tuple[int, ...] = ()) -> GpuHealth:
    return GpuHealth(
        index=0,
        utilization_percent=90,
        memory_used_gib=3.0,
        temperature_celsius=60,
        ecc_uncorrected_errors=ecc,
        xid_errors=xids,
    )


def test_the_stall_bound_is_a_factor_of_the_expected_step_with_a_floor() -> None:
    rule = StallRule(factor=5, floor_seconds=60, startup_seconds=30)
    assert rule.bound(None) == 60
    assert rule.bound(4.0) == 60
    assert rule.bound(20.0) == 100
    assert rule.bound(20.0, first_step=True) == 130
    assert expected_step(10.0, 25.0) == 25.0
    assert expected_step(None, None) is None


def test_uncorrected_errors_and_critical_xids_make_a_gpu_sick() -> None:
    assert errors_in(health()) is None
    assert errors_in(health(ecc=None, xids=(13, 31))) is None  # an application's own faults
    assert errors_in(health(ecc=2)) == "2 uncorrected ECC errors"
    assert errors_in(health(xids=(79,))) == "XID 79"


def test_a_gpu_is_slow_only_against_enough_peers_and_steps() -> None:
    rule = SickRule()
    peers = [20.0, 21.0, 19.0]
    assert too_slow(10, 800.0, peers, rule) is not None
    assert too_slow(10, 500.0, peers, rule) is None  # 2.5x: a slower step, not a sick GPU
    assert too_slow(5, 800.0, peers, rule) is None  # too few steps yet
    assert too_slow(10, 800.0, peers[:2], rule) is None  # too few peers to compare with


def test_two_stalls_quarantine_a_gpu_and_one_does_not() -> None:
    stall = GpuFault("w", "i-1", 0, GpuFaultKind.STALL, "no step", START)
    assert quarantine_reason([stall], SickRule()) is None
    assert quarantine_reason([stall, stall], SickRule()) is not None


def test_the_faults_before_a_release_no_longer_count() -> None:
    stall = GpuFault("w", "i-1", 0, GpuFaultKind.STALL, "no step", START)
    release = replace(stall, kind=GpuFaultKind.RELEASE, detail="released by an operator")
    assert quarantine_reason([stall, stall, release], SickRule()) is None
    assert quarantine_reason([stall, stall, release, stall], SickRule()) is None
    assert quarantine_reason([stall, release, stall, stall], SickRule()) is not None


class FaultBook:
    def __init__(self) -> None:
        self.faults: list[GpuFault] = []

    def record_gpu_fault(self, fault: GpuFault) -> None:
        self.faults.append(fault)

    def gpu_faults(self, worker_id: str | None = None) -> list[GpuFault]:
        return [f for f in self.faults if worker_id in (None, f.worker_id)]

    def quarantined_gpus(self) -> set[tuple[str, int]]:
        return {
            (f.worker_id, f.gpu_index) for f in self.faults if f.kind is GpuFaultKind.QUARANTINE
        }


def hello(clock: FakeClock, worker_id: str = "w", instance_id: str = "i-0000000001") -> Hello:
    return Hello(
        worker_id=worker_id,
        sent_at=clock.now(),
        instance_id=instance_id,
        instance_type="g5.xlarge",
        availability_zone="us-east-1a",
        market=Market.SPOT,
        agent_version="t",
        gpus=(GpuInfo(index=0, family="a10g", vram_gib=24),),
    )


def fleet(clock: FakeClock) -> WorkerRegistry:
    registry = WorkerRegistry(clock)
    registry.on_hello(hello(clock))
    return registry


def beat(
    registry: WorkerRegistry,
    clock: FakeClock,
    sequence: int,
    step: int,
    gpu: GpuHealth | None = None,
) -> None:
    registry.on_heartbeat(
        Heartbeat(
            worker_id="w",
            sent_at=clock.now(),
            sequence=sequence,
            jobs=(JobProgress(job_id="j", attempt=1, gpu_index=0, step=step, total_steps=50),),
            gpus=(gpu,) if gpu else (),
        )
    )


async def test_a_job_whose_step_stops_is_found_stalled_after_its_bound_and_not_before() -> None:
    clock = FakeClock(START)
    registry, book = fleet(clock), FaultBook()
    watch = GpuWatch(
        book, registry, clock, WatchSettings(StallRule(5, 10, 5), before_first_step_seconds=30)
    )
    running = record("j", JobState.RUNNING)
    placement = Placement(running, "w", 0, clock.now())
    beat(registry, clock, 1, 0)
    assert (await watch.look([placement], {"j": 2.0})).stalled == []
    clock.advance(25)  # loading the model: inside the allowance before the first step
    assert (await watch.look([placement], {"j": 2.0})).stalled == []
    for sequence, step in enumerate([1, 2, 3], start=2):
        clock.advance(2)
        beat(registry, clock, sequence, step)
        assert (await watch.look([placement], {"j": 2.0})).stalled == []
    # Bound: max(10, 5 x 2 s) and the control plane's grace of 5 s: 15 s without a step.
    clock.advance(14)
    assert (await watch.look([placement], {"j": 2.0})).stalled == []
    clock.advance(2)
    found = await watch.look([placement], {"j": 2.0})
    assert [p.job.job_id for p, _ in found.stalled] == ["j"]
    assert [(f.worker_id, f.gpu_index, f.kind) for f in book.faults] == [
        ("w", 0, GpuFaultKind.STALL)
    ]


async def test_uncorrected_ecc_in_a_heartbeat_quarantines_the_gpu_and_takes_it_off_the_board() -> (
    None
):
    clock = FakeClock(START)
    registry, book = fleet(clock), FaultBook()
    watch = GpuWatch(book, registry, clock, WatchSettings())
    beat(registry, clock, 1, 0, health(ecc=0))
    assert (await watch.look([], {})).quarantined == []
    assert registry.free_gpus(set(), frozenset({"w"})) == 1
    beat(registry, clock, 2, 0, health(ecc=3))
    found = await watch.look([], {})
    assert [(q.worker_id, q.gpu_index) for q in found.quarantined] == [("w", 0)]
    assert registry.free_gpus(set(), frozenset({"w"})) == 0
    assert registry.snapshot({})[0].gpus == ()
    # Durable, and found once: the next look finds nothing new.
    assert book.quarantined_gpus() == {("w", 0)}
    assert (await watch.look([], {})).quarantined == []


async def test_with_detection_off_nothing_is_looked_for() -> None:
    clock = FakeClock(START)
    registry, book = fleet(clock), FaultBook()
    watch = GpuWatch(book, registry, clock, WatchSettings(enabled=False))
    beat(registry, clock, 1, 0, health(ecc=3))
    assert (await watch.look([], {})).quarantined == []
    assert book.faults == []
    assert clock.now() - START == timedelta(0)


async def test_a_gone_workers_last_report_of_an_earlier_attempt_does_not_hide_the_live_steps() -> (
    None
):
    """A job interrupted on one worker resumes on another; the first keeps its last heartbeat
    in the registry (attempt 1, step 10). The live attempt's steps are what count: found in a
    fleet simulation, where a resumed job was stopped as stalled while it stepped."""
    clock = FakeClock(START)
    registry, book = fleet(clock), FaultBook()
    registry.on_hello(hello(clock, "gone", "i-0000000002"))
    registry.on_heartbeat(
        Heartbeat(
            worker_id="gone",
            sent_at=clock.now(),
            sequence=1,
            jobs=(JobProgress(job_id="j", attempt=1, gpu_index=0, step=10, total_steps=50),),
        )
    )
    watch = GpuWatch(
        book, registry, clock, WatchSettings(StallRule(5, 10, 5), before_first_step_seconds=30)
    )
    resumed = replace(record("j", JobState.RUNNING), attempt=2)
    placement = Placement(resumed, "w", 0, clock.now())
    for sequence, step in enumerate(range(10, 40), start=1):
        registry.on_heartbeat(
            Heartbeat(
                worker_id="w",
                sent_at=clock.now(),
                sequence=sequence,
                jobs=(JobProgress(job_id="j", attempt=2, gpu_index=0, step=step, total_steps=50),),
            )
        )
        assert (await watch.look([placement], {"j": 2.0})).stalled == []
        clock.advance(2)
    assert book.faults == []


def test_a_quarantined_gpu_holds_a_job_that_spans_it_not_only_one_led_from_it() -> None:
    at = datetime(2026, 12, 5, tzinfo=UTC)
    spanning = Placement(record("span", JobState.RUNNING), "w", 0, at, span=(1, 2))
    sick = Quarantine("w", "i-0000000001", 2, "uncorrected ECC errors")
    assert sick.holds(spanning)
    assert not replace(sick, gpu_index=3).holds(spanning)
    assert not replace(sick, worker_id="v").holds(spanning)
