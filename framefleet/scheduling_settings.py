"""The scheduling knobs a platform team turns (`[control.scheduling]` in TOML,
`FRAMEFLEET_CONTROL__SCHEDULING__…`): aging, preemption, how much of the queue a tick reads, and
when a GPU is judged stalled or sick. The defaults are the product's; README's settings table
says what each does."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from kernel.stall import StallRule
from orchestrator.control.scheduling_view import QueueReads
from orchestrator.control.settings import ControlSettings
from orchestrator.scheduling.gpu_health import SickRule
from orchestrator.scheduling.quotas import TeamQuota
from orchestrator.scheduling.snapshots import SchedulerSettings

# A GPU family as jobs name them, or "*" for any family.
QUOTA_KEY = r"^(\*|[a-z0-9]{1,16})$"


class TeamQuotaConfig(BaseModel):
    """A team's share (`orchestrator/scheduling/quotas.py`): GPUs at once per family, or for
    any family with "*", and whether it may borrow what other teams leave idle."""

    model_config = ConfigDict(extra="forbid")
    gpus: dict[Annotated[str, Field(pattern=QUOTA_KEY)], Annotated[int, Field(ge=0)]] = Field(
        min_length=1, max_length=32
    )
    borrow: bool = True
    spend_per_day: float | None = Field(default=None, ge=0, description="USD, UTC days")


class SchedulingConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Priority points a queued job gains per hour of waiting (0: no aging; low priority may
    # then starve behind a steady stream of urgent jobs).
    aging_per_hour: float = Field(default=1.0, ge=0, le=100)
    # A job may preempt a running one only this many base-priority points below it.
    preemption_margin: int = Field(default=2, ge=1, le=10)
    # Priority points a queued job gains once its deadline is at risk (its latest start
    # within `deadline_startup_seconds`), so it goes before jobs that merely waited longer.
    at_risk_boost: float = Field(default=2.0, ge=0, le=100)
    # The queue a tick reads: per free GPU, at least, at most; besides, every reserved job and
    # up to `at_risk_most` jobs whose deadline is at risk within `deadline_startup_seconds`.
    queue_read_per_free_gpu: int = Field(default=4, ge=1, le=100)
    queue_read_least: int = Field(default=200, ge=1, le=100_000)
    queue_read_most: int = Field(default=2000, ge=1, le=100_000)
    queue_read_at_risk_most: int = Field(default=10_000, ge=1, le=1_000_000)
    deadline_startup_seconds: float = Field(default=1800.0, ge=0, le=86_400)
    # A step is stalled after max(floor, factor x its expected time), plus the start-up on the
    # first step (the worker's own watchdog has the same rule in its settings).
    stall_factor: float = Field(default=5.0, gt=1, le=1000)
    stall_floor_seconds: float = Field(default=60.0, gt=0)
    stall_startup_seconds: float = Field(default=60.0, ge=0)
    # A GPU is quarantined after this many stalls, or once its pace is `slow_factor` times its
    # family's over at least `slow_min_steps` steps and `slow_min_seconds`, with at least
    # `slow_min_peers` other GPUs of the family to compare with.
    quarantine_after_stalls: int = Field(default=2, ge=1, le=100)
    slow_factor: float = Field(default=3.0, gt=1, le=100)
    slow_min_steps: int = Field(default=10, ge=1)
    slow_min_seconds: float = Field(default=120.0, ge=0)
    slow_min_peers: int = Field(default=3, ge=1)
    # Team (a job's `tags.team`) -> its share of GPUs; teams left out are not limited.
    team_quotas: dict[str, TeamQuotaConfig] = Field(default_factory=dict, max_length=1000)
    # The team of the jobs that name none: `team_quotas` may give it a share of its own.
    default_team: str = Field(default="default", min_length=1, max_length=128)

    def apply(self, settings: ControlSettings) -> ControlSettings:
        sick = SickRule(
            slow_factor=self.slow_factor,
            slow_min_steps=self.slow_min_steps,
            slow_min_seconds=self.slow_min_seconds,
            slow_min_peers=self.slow_min_peers,
            stalls_to_quarantine=self.quarantine_after_stalls,
        )
        stall = StallRule(self.stall_factor, self.stall_floor_seconds, self.stall_startup_seconds)
        return replace(
            settings,
            scheduler=SchedulerSettings(
                self.aging_per_hour,
                self.preemption_margin,
                self.at_risk_boost,
                self.deadline_startup_seconds,
                {
                    team: TeamQuota(dict(quota.gpus), quota.borrow, quota.spend_per_day)
                    for team, quota in self.team_quotas.items()
                },
                self.default_team,
            ),
            queue_reads=QueueReads(
                least=self.queue_read_least,
                most=max(self.queue_read_most, self.queue_read_least),
                per_free_gpu=self.queue_read_per_free_gpu,
                at_risk_most=self.queue_read_at_risk_most,
                startup=timedelta(seconds=self.deadline_startup_seconds),
            ),
            watch=replace(settings.watch, stall=stall, sick=sick),
        )
