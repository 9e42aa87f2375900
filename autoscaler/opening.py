"""A launch the purchase policy is planning: its pool, the jobs it carries so far and the
GPUs it has left for the jobs that follow."""

from __future__ import annotations

from dataclasses import dataclass

from autoscaler.market.quotes import PoolQuote
from autoscaler.pool_choice import fits, spot_zone_allowed
from autoscaler.pools import Pool
from autoscaler.snapshot import JobDemand, Launch
from kernel.instance_types import InstanceKind, kind_of
from kernel.market import Market


@dataclass
class Opening:
    """A launch this plan makes, with the GPUs it has left for the jobs that follow."""

    quote: PoolQuote
    kind: InstanceKind
    reason: str
    alternatives: tuple[Pool, ...]
    jobs: list[JobDemand]
    typical: JobDemand | None = None  # what a pre-warmed instance, bought for no job, must fit

    @property
    def free(self) -> int:
        return self.kind.gpus - sum(job.gpus for job in self.jobs)

    def takes(self, job: JobDemand, market: Market) -> bool:
        """A free GPU of an on-demand launch serves any job; of a spot one, a job that may
        run on spot there."""
        pool = self.quote.pool
        spot_ok = market is Market.SPOT and spot_zone_allowed(job, pool)
        return (
            self.free >= job.gpus
            and fits(job, self.kind)
            and (pool.market is Market.ON_DEMAND or spot_ok)
        )

    def launch(self) -> Launch:
        """What EC2 is asked for: the pools EC2 may take instead must carry every job too."""
        jobs = self.jobs or ([] if self.typical is None else [self.typical])
        alternatives = tuple(
            p
            for p in self.alternatives
            if kind_of(p.instance_type).gpus >= sum(j.gpus for j in jobs)
            and all(fits(j, kind_of(p.instance_type)) and spot_zone_allowed(j, p) for j in jobs)
        )
        reason = self.reason
        if len(self.jobs) > 1:
            others = ", ".join(j.job_id for j in self.jobs[1:])
            reason += f"; its other GPUs for {others}"
        return Launch(
            self.quote.pool,
            self.quote.price_per_hour,
            tuple(j.job_id for j in self.jobs),
            reason,
            alternatives,
        )
