"""One rule for "fits" (issue 46, defect 2): whatever the autoscaler buys, or places a job on,
the scheduler can give the job there once the instance is up, over random fleets, jobs and
candidate types. Before, the autoscaler bought by the memory a GPU is sold with (an L40S: 48
GiB) and the scheduler assigned by what the GPU reports (44.99 GiB), so a 46.8 GiB job had an
instance bought that it could never run on."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.market.quotes import MarketSnapshot, PoolQuote
from autoscaler.policy import plan
from autoscaler.pools import Pool
from autoscaler.snapshot import InstanceView, JobDemand, PlanInput, PurchaseSettings
from autoscaler.throughput import WorkShape
from kernel.instance_types import CATALOG, kind_of
from kernel.market import GpuFamily, Market
from orchestrator.scheduling.fit import fits_kind
from orchestrator.scheduling.snapshots import GpuSlot, PendingJob
from tests.support.market_snapshots import NOW
from tests.support.paces import linear_pace

TYPES = sorted(CATALOG)
ZONE = "us-east-1a"
FAMILIES = [
    family.value for family in GpuFamily if family.value in {k.family for k in CATALOG.values()}
]


def quotes_for(types: list[str]) -> MarketSnapshot:
    quotes = {}
    for instance_type in types:
        kind = kind_of(instance_type)
        price = kind.gpus * kind.vram_gib / 20  # dearer with more memory, as the market is
        for market, factor in ((Market.SPOT, 0.4), (Market.ON_DEMAND, 1.0)):
            pool = Pool(instance_type, ZONE, market)
            quotes[pool] = PoolQuote(pool, price * factor, 0.002 if factor < 1 else 0.0)
    return MarketSnapshot(NOW, quotes)


jobs = st.builds(
    lambda i, need, families, gpus, hours: JobDemand(
        f"j{i}",
        5,
        NOW,
        None if hours is None else NOW + timedelta(hours=hours),
        WorkShape("wan/t2v", 832, 480, 81),
        300,
        min_vram_gib=need,
        families=frozenset(families),
        gpus=gpus,
    ),
    st.integers(0, 10_000),
    st.sampled_from(
        [8.0, 15.0, 16.0, 22.0, 24.0, 36.1, 44.99, 45.9, 46.8, 48.0, 56.6, 79.0, 80.0, 100.0]
    ),
    st.sets(st.sampled_from(FAMILIES), max_size=2),
    st.sampled_from([1, 1, 1, 2, 4]),
    st.none() | st.floats(0.5, 12),
)


# What nvidia-smi reports as each GPU's total memory (MiB), as public outputs on these instance
# types show it: the worker's hello says this, whatever the catalogue says.
NVML_MIB = {"t4": 15360, "v100": 16160, "a10g": 23028, "l4": 23034, "l40s": 46068}
NVML_MIB |= {"a100": 40960, "h100": 81559, "h200": 143771}
NVML_MIB_BY_TYPE = {"p4de.24xlarge": 81920}


def reported_slots(instance_id: str, instance_type: str) -> list[GpuSlot]:
    """The GPUs a worker on the type reports once up: NVML's memory, not the catalogue's."""
    kind = kind_of(instance_type)
    mib = NVML_MIB_BY_TYPE.get(instance_type, NVML_MIB[kind.family.value])
    return [GpuSlot(instance_id, i, kind.family.value, mib / 1024) for i in range(kind.gpus)]


def assignable(job: JobDemand, slots: list[GpuSlot]) -> bool:
    pending = PendingJob(
        job.job_id, job.priority, job.deadline, job.submitted_at, job.min_vram_gib, job.families
    )
    return sum(fits_kind(pending, slot) for slot in slots) >= job.gpus


@settings(max_examples=200, deadline=None)
@given(
    st.lists(jobs, min_size=1, max_size=8, unique_by=lambda j: j.job_id),
    st.sets(st.sampled_from(TYPES), min_size=1, max_size=6),
    st.lists(st.sampled_from(TYPES), max_size=3),
)
def test_what_the_autoscaler_buys_or_places_on_the_scheduler_can_assign(
    queue: list[JobDemand], candidates: set[str], fleet: list[str]
) -> None:
    types = sorted(candidates)
    instances = tuple(
        InstanceView(
            f"i-{n:08x}", Pool(t, ZONE, Market.SPOT), 1.0, NOW - timedelta(hours=1), kind_of(t).gpus
        )
        for n, t in enumerate(fleet)
    )
    state = PlanInput(NOW, tuple(queue), instances, quotes_for(sorted({*types, *fleet})))
    purchase = PurchaseSettings(
        candidate_types=tuple(types), budget_per_hour=10_000, budget_per_day=1e6
    )
    decided = plan(state, purchase, linear_pace())
    by_id = {job.job_id: job for job in queue}
    for launch in decided.launches:
        for job_id in launch.job_ids:
            slots = reported_slots("new", launch.pool.instance_type)
            assert assignable(by_id[job_id], slots), (job_id, launch.pool.instance_type)
    views = {i.instance_id: i for i in instances}
    for job_id, instance_id in decided.placed:
        slots = reported_slots(instance_id, views[instance_id].pool.instance_type)
        assert assignable(by_id[job_id], slots), (job_id, instance_id)
