"""Frozen inputs and outputs of the purchase policy."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from autoscaler.market.quotes import MarketSnapshot
from autoscaler.pools import Pool
from autoscaler.throughput import WorkShape
from kernel.market import Market
from kernel.render_stage import RenderStage


@dataclass(frozen=True)
class JobDemand:
    """A queued job (new, or back from an interrupted instance with its progress)."""

    job_id: str
    priority: int
    submitted_at: datetime
    deadline: datetime | None
    shape: WorkShape
    steps_total: int
    steps_done: int = 0
    min_vram_gib: float = 15.0  # the job spec's default
    families: frozenset[str] = frozenset()  # empty: any
    spot_zones: frozenset[str] = frozenset()  # where it may run on spot; empty: any zone
    max_cost_usd: float | None = None  # no pool that would cost it more is bought
    gpus: int = 1  # of one instance, for a job that spans several (`gpu.count`)
    # Where it runs now, for a running job asked about (back to spot); None: it waits.
    running_on: Market | None = None
    # The stage its next attempt runs, of a render split into stages (None: whole), and
    # whether it may still be split (it never ran, spans no GPUs, did not ask for `exact`).
    stage: RenderStage | None = None
    may_split: bool = False

    @property
    def steps_left(self) -> int:
        return max(0, self.steps_total - self.steps_done)


@dataclass(frozen=True)
class RunningDemand:
    demand: JobDemand  # steps done: its last durable checkpoint's
    instance_id: str


@dataclass(frozen=True)
class InstanceView:
    instance_id: str
    pool: Pool
    price_per_hour: float
    launched_at: datetime
    gpus: int
    busy_gpus: int = 0
    idle_since: datetime | None = None
    # Running a job whose work since its last checkpoint would be lost by a termination.
    unsaved_work: bool = False


@dataclass(frozen=True)
class LapsedClaim:
    """An instance an earlier round bought or picked for a job that the scheduler did not give
    it before the claim ran out: what the scheduler sees there does not hold the job (its
    worker shares or slices its GPUs, or the job must avoid it), so the job is neither placed
    there again nor bought that type again."""

    instance_id: str  # the latest
    instance_types: frozenset[str]  # of every claim of the job that lapsed


class SplitMode(StrEnum):
    """Which queued renders the autoscaler splits into stages (`stage_split.py`)."""

    AUTO = "auto"  # where the render planner finds it cheaper (the default)
    NEVER = "never"
    ALWAYS = "always"  # every render that may be split (for tests and demonstrations)


DEFAULT_CANDIDATE_TYPES = (
    "g6e.xlarge",
    "g6e.12xlarge",
    "g6.xlarge",
    "g6.12xlarge",
    "g5.xlarge",
    "g5.12xlarge",
    "g4dn.xlarge",
    "g4dn.12xlarge",
    "p4d.24xlarge",
    "p5.48xlarge",
)


@dataclass(frozen=True)
class PurchaseSettings:
    # One-GPU and multi-GPU sizes of each family, so queued jobs can be packed, and the 40 GB
    # and 80 GB GPUs that large models need.
    candidate_types: tuple[str, ...] = DEFAULT_CANDIDATE_TYPES
    # USD, the whole fleet: room for a p5.48xlarge on demand ($98.32/h) beside smaller ones.
    budget_per_hour: float = 250.0
    budget_per_day: float = 4000.0  # USD, today's spend plus the next hour at the new rate
    boot_seconds: float = 150.0  # launch to agent ready
    model_load_seconds: float = 60.0
    checkpoint_interval_seconds: float = 600.0  # work an interruption may lose, at most
    # From a lost instance to its replacement's launch: the autoscaler's round interval.
    reaction_seconds: float = 30.0
    # Behind uniform progress, spot only with this many interruptions' worth of slack. 1 adds
    # nothing to the safety net; raise it to move lagging jobs to on-demand early, as Uniform
    # Progress does (the simulator measured that costing 6-7% more without saving a deadline).
    behind_slack_factor: float = 1.0
    # Of the spot fleet in one pool, among pools worth spreading to. 1: no spreading, the
    # default: spreading did not lower the cost on the simulator's 8 weeks (issue 32).
    max_pool_share: float = 1.0
    # Rank zones of one instance type by each zone's own interruption rate where it stands out
    # of counting noise (True, the default: `autoscaler/zone_risk.py`) or by price alone, with
    # the type's mean rate. Types are always ranked with their rates.
    zone_risk: bool = True
    # A pool is worth spreading to if its expected cost per video is at most this much above
    # the best pool's.
    max_spread_premium: float = 0.10
    max_launches: int = 100  # per plan
    # Equally good spot pools a launch offers CreateFleet besides its own (0: one override).
    max_alternatives: int = 4
    idle_timeout: timedelta = timedelta(minutes=10)
    warm_minimum: int = 0
    # What an hour of a job's waiting for a boot is worth (USD): with a forecast of arrivals,
    # idle spot GPUs are kept or bought ahead of the jobs when the waiting they save is worth
    # more than their idle time (`autoscaler/prewarm.py`). 0: never.
    prewarm_wait_value_per_job_hour: float = 0.0
    # A job on on-demand moves back to spot when its deadline allows and the move saves more
    # than this many hours of its on-demand GPU (`autoscaler/spot_return.py`).
    return_to_spot: bool = True
    return_to_spot_margin_hours: float = 0.5
    # Which queued renders are split into stages (`stage_split.py`): where cheaper, never, or
    # every one that may be.
    split_renders: SplitMode = SplitMode.AUTO


@dataclass(frozen=True)
class PlanInput:
    now: datetime
    queued: tuple[JobDemand, ...]
    instances: tuple[InstanceView, ...]
    market: MarketSnapshot
    spent_today: float = 0.0  # USD so far today
    # job -> the instance an earlier round bought or picked for it (still booting, or free).
    reservations: Mapping[str, str] = field(default_factory=dict)
    # Jobs the forecast expects within one new instance's start-up, and the latest job seen
    # (what a pre-warmed GPU must fit).
    expected_arrivals: float = 0.0
    typical_job: JobDemand | None = None
    # Spot instance -> the running job moving there from on-demand: its GPU is spoken for.
    moving_to_spot: Mapping[str, str] = field(default_factory=dict)
    running: tuple[RunningDemand, ...] = ()  # with their progress (for the reservations)
    # Service Quotas code -> the vCPUs still free under it (`autoscaler/quota_room.py`); a
    # quota left out is not known and does not limit the plan.
    quota_room: Mapping[str, float] = field(default_factory=dict)
    # job -> the claim of it that ran out unused (`autoscaler/reservations.py`).
    lapsed: Mapping[str, LapsedClaim] = field(default_factory=dict)


@dataclass(frozen=True)
class Launch:
    pool: Pool
    price_per_hour: float
    job_ids: tuple[str, ...]
    reason: str
    # Spot pools as good as `pool` (within the spread premium, under the spread cap), which
    # CreateFleet's price-capacity-optimized may take instead when it judges them deeper.
    alternatives: tuple[Pool, ...] = ()


@dataclass(frozen=True)
class Terminate:
    instance_id: str
    reason: str


@dataclass(frozen=True)
class CapacityWait:
    job_id: str
    reason: str
    # The account limit it waits for, by name (a quota, a subnet); "" when it is not one.
    limit: str = ""


@dataclass(frozen=True)
class Plan:
    launches: tuple[Launch, ...] = ()
    terminations: tuple[Terminate, ...] = ()
    waits: tuple[CapacityWait, ...] = ()
    placed: tuple[tuple[str, str], ...] = ()  # (job, instance) on capacity already there

    def markets(self) -> dict[Market, int]:
        counts = {market: 0 for market in Market}
        for launch in self.launches:
            counts[launch.pool.market] += 1
        return counts
