"""A hello is believed only as far as the worker's credentials and EC2 vouch for it: its
instance is the one its account names, its hardware its instance type's, its market EC2's.
And each worker's messages are read within a budget, before a byte of them is parsed."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from kernel.clock import FakeClock
from kernel.instance_types import A10G_GIB
from kernel.market import Market
from kernel.worker_protocol import GpuInfo, Hello
from orchestrator.control.admission import Refused
from orchestrator.control.budgets import BudgetVerdict, MessageBudget, SenderBudgets
from orchestrator.control.identity import UNLISTED, KnownInstance, VettedHello, vet_hello
from orchestrator.control.readiness import Readiness
from orchestrator.scheduling.registry import WorkerRegistry
from orchestrator.store.cost_facts import SlotShare

NOW = datetime(2026, 12, 5, tzinfo=UTC)
MINE, OTHERS = "i-0aaaaaaaaaaaaaaa1", "i-0bbbbbbbbbbbbbbb2"


def hello(
    worker_id: str = MINE,
    instance_id: str | None = MINE,
    instance_type: str = "g5.xlarge",
    gpus: int = 1,
    vram_gib: float = A10G_GIB,  # as NVML reports it
    family: str = "a10g",
    market: Market = Market.SPOT,
) -> Hello:
    return Hello(
        worker_id=worker_id,
        sent_at=NOW,
        instance_id=instance_id,
        instance_type=instance_type,
        availability_zone="us-east-1a",
        market=market,
        gpus=tuple(GpuInfo(index=i, family=family, vram_gib=vram_gib) for i in range(gpus)),
        agent_version="test",
    )


def believed(result: VettedHello | Refused) -> VettedHello:
    assert isinstance(result, VettedHello), result
    return result


def test_an_honest_hello_is_believed_as_it_is() -> None:
    honest = hello()
    vetted = believed(vet_hello(honest, KnownInstance("g5.xlarge", Market.SPOT), False))
    assert vetted.hello == honest
    assert vetted.clamped == ()


def test_a_hello_naming_another_instance_is_refused() -> None:
    refused = vet_hello(hello(instance_id=OTHERS), None, workers_off_ec2=True)
    assert isinstance(refused, Refused)
    assert refused.reason == "foreign_instance"


def test_claimed_hardware_is_clamped_to_the_instance_type() -> None:
    greedy = hello(gpus=64, vram_gib=1024, family="h200")
    vetted = believed(vet_hello(greedy, KnownInstance("g5.xlarge", Market.SPOT), False))
    assert vetted.hello.gpus == (GpuInfo(index=0, family="a10g", vram_gib=A10G_GIB),)
    assert any("64 GPUs" in claim for claim in vetted.clamped)


def test_ec2s_type_and_market_win_over_the_hellos() -> None:
    liar = hello(instance_type="p5.48xlarge", gpus=8, vram_gib=80, family="h100")
    vetted = believed(vet_hello(liar, KnownInstance("g5.xlarge", Market.ON_DEMAND), False))
    assert vetted.hello.instance_type == "g5.xlarge"
    assert vetted.hello.market is Market.ON_DEMAND
    assert len(vetted.hello.gpus) == 1
    assert vetted.clamped


def test_an_instance_the_autoscaler_did_not_launch_gets_no_work() -> None:
    liar = hello(instance_type="p5.48xlarge", gpus=8, vram_gib=80, family="h100")
    refused = vet_hello(liar, None, workers_off_ec2=False)
    assert isinstance(refused, Refused)
    assert refused.reason == UNLISTED
    # Where workers off EC2 are allowed, it is held to the type it names.
    vetted = believed(vet_hello(hello(gpus=4), None, workers_off_ec2=True))
    assert len(vetted.hello.gpus) == 1


def test_a_type_nobody_sells_is_refused_unless_workers_off_ec2_are_allowed() -> None:
    odd = hello(instance_type="local")
    refused = vet_hello(odd, KnownInstance("local", Market.SPOT), workers_off_ec2=False)
    assert isinstance(refused, Refused)
    assert refused.reason == "unknown_instance_type"
    assert believed(vet_hello(odd, None, workers_off_ec2=True)).hello == odd


def test_a_worker_on_no_instance_stands_for_itself_only_where_allowed() -> None:
    workstation = hello(worker_id="w-laptop", instance_id=None, instance_type="local")
    refused = vet_hello(workstation, None, workers_off_ec2=False)
    assert isinstance(refused, Refused)
    assert refused.reason == "off_ec2_worker"
    vetted = believed(vet_hello(workstation, None, workers_off_ec2=True))
    assert vetted.hello.instance == "w-laptop"


def test_gpus_past_the_types_are_refused() -> None:
    beyond = hello().model_copy(
        update={"gpus": (GpuInfo(index=3, family="a10g", vram_gib=A10G_GIB),)}
    )
    refused = vet_hello(beyond, KnownInstance("g5.xlarge", Market.SPOT), workers_off_ec2=False)
    assert isinstance(refused, Refused)
    assert refused.reason == "unknown_hardware"


BUDGET = MessageBudget(per_second=10, burst=20, flood_after=100, quarantine_seconds=60)


def test_a_burst_within_the_bucket_is_read_and_the_rest_dropped() -> None:
    clock = FakeClock(NOW)
    budgets = SenderBudgets(clock, BUDGET)
    verdicts = [budgets.take(MINE) for _ in range(25)]
    assert verdicts.count(BudgetVerdict.ALLOWED) == 20
    assert verdicts[20:] == [BudgetVerdict.OVER_BUDGET] * 5
    clock.advance(1.0)  # ten more tokens
    assert [budgets.take(MINE) for _ in range(11)].count(BudgetVerdict.ALLOWED) == 10


def test_each_sender_spends_its_own_budget() -> None:
    budgets = SenderBudgets(FakeClock(NOW), BUDGET)
    for _ in range(500):
        budgets.take(OTHERS)
    assert budgets.take(MINE) is BudgetVerdict.ALLOWED


def test_a_flood_quarantines_its_sender_for_a_while() -> None:
    clock = FakeClock(NOW)
    budgets = SenderBudgets(clock, BUDGET)
    verdicts = [budgets.take(OTHERS) for _ in range(20 + 100)]
    assert verdicts[-1] is BudgetVerdict.FLOODING
    assert verdicts.count(BudgetVerdict.FLOODING) == 1
    assert budgets.quarantined() == [OTHERS]
    clock.advance(5)
    assert budgets.take(OTHERS) is BudgetVerdict.QUARANTINED  # read, but marked
    clock.advance(60)
    assert budgets.take(OTHERS) is BudgetVerdict.ALLOWED
    assert budgets.quarantined() == []


@pytest.mark.parametrize("senders", [10, 1000])
def test_budgets_memory_is_bounded(senders: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("orchestrator.control.budgets.MAX_SENDERS", 100)
    budgets = SenderBudgets(FakeClock(NOW), BUDGET)
    for n in range(senders):
        budgets.take(f"w-{n}")
    assert budgets.remembered() == min(senders, 100)


def test_a_quiet_senders_bucket_is_forgotten_once_full_again() -> None:
    clock = FakeClock(NOW)
    budgets = SenderBudgets(clock, BUDGET)
    for _ in range(5):
        budgets.take(MINE)
    for _ in range(20 + 100):
        budgets.take(OTHERS)  # floods: quarantined for 60 s
    clock.advance(10)  # both buckets full again
    budgets.forget_idle()
    assert budgets.remembered() == 1  # the quarantine is remembered, the quiet sender is not
    clock.advance(60)
    budgets.forget_idle()
    assert budgets.remembered() == 0


def mig(index: int, family: str, vram: float, physical: int, share: float = 1.0) -> GpuInfo:
    return GpuInfo(
        index=index, family=family, vram_gib=vram, physical=physical, compute_share=share
    )


def test_mig_slots_are_believed_within_their_gpu_and_no_more_of_it() -> None:
    split = (
        mig(0, "a100mig1", 5, 0, 1 / 7),
        mig(1, "a100mig1", 5, 0, 1 / 7),
        mig(2, "a100mig3", 20, 0, 3 / 7),
        mig(3, "a100", 40, 1),
    )
    honest = hello(instance_type="p4d.24xlarge", family="a100").model_copy(update={"gpus": split})
    vetted = believed(vet_hello(honest, KnownInstance("p4d.24xlarge", Market.SPOT), False))
    assert vetted.hello.gpus == split
    assert vetted.clamped == ()
    # Slices of a GPU beyond the whole of it (compute or memory), a slice of another family,
    # a slice of a GPU the type has not: clamped or dropped.
    greedy = (
        mig(0, "a100mig7", 40, 0, 1.0),
        mig(1, "a100mig1", 5, 0, 1 / 7),  # GPU 0 is all taken
        mig(2, "h100mig3", 20, 1, 3 / 7),  # not the type's family
        mig(3, "a100mig3", 20, 8, 3 / 7),  # p4d has GPUs 0-7
    )
    liar = honest.model_copy(update={"gpus": greedy})
    clamped = believed(vet_hello(liar, KnownInstance("p4d.24xlarge", Market.SPOT), False))
    assert [(g.index, g.family, g.physical) for g in clamped.hello.gpus] == [
        (0, "a100mig7", 0),
        (2, "a100mig", 1),
    ]
    assert clamped.clamped


class LayoutBook:
    def __init__(self) -> None:
        self.written: dict[str, tuple[datetime, list[SlotShare]]] = {}

    def record_instance_ready(
        self, instance_id: str, at: datetime, layout: Sequence[SlotShare] = ()
    ) -> None:
        self.written[instance_id] = (at, list(layout))


async def test_the_first_hello_of_a_mig_instance_records_each_slots_part_of_its_gpu() -> None:
    split = (mig(0, "a100mig3", 20, 0, 3 / 7), mig(1, "a100mig4", 20, 0, 4 / 7))
    registry = WorkerRegistry(FakeClock(NOW))
    registry.on_hello(hello(instance_type="p4d.24xlarge").model_copy(update={"gpus": split}))
    book = LayoutBook()
    await Readiness(book, registry).step()
    at, layout = book.written[MINE]
    assert at == NOW
    assert layout == [SlotShare(0, 0, 3 / 7), SlotShare(1, 0, 4 / 7)]
    # A machine without MIG records no layout: the ledger splits its price per GPU.
    plain = WorkerRegistry(FakeClock(NOW))
    plain.on_hello(hello())
    whole = LayoutBook()
    await Readiness(whole, plain).step()
    assert whole.written[MINE][1] == []


def test_turns_on_a_shared_gpu_are_believed_as_their_part_of_it() -> None:
    turns = tuple(
        GpuInfo(
            index=i,
            family="a10g",
            vram_gib=A10G_GIB / 2,
            physical=0,
            compute_share=0.5,
            time_shared=True,
        )
        for i in range(2)
    )
    honest = hello().model_copy(update={"gpus": turns})
    vetted = believed(vet_hello(honest, KnownInstance("g5.xlarge", Market.SPOT), False))
    assert vetted.hello.gpus == turns
    # A third turn would take more of the GPU than it has.
    third = GpuInfo(
        index=2,
        family="a10g",
        vram_gib=A10G_GIB / 2,
        physical=0,
        compute_share=0.5,
        time_shared=True,
    )
    greedy = honest.model_copy(update={"gpus": (*turns, third)})
    clamped = believed(vet_hello(greedy, KnownInstance("g5.xlarge", Market.SPOT), False))
    assert len(clamped.hello.gpus) == 2
