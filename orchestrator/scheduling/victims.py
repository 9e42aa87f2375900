"""Which running job gives its GPU way to a queued one: a team taking back its share from a
borrower, or a much more urgent job from the least urgent (never one due before it)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from orchestrator.scheduling.fit import fits, moment_seconds
from orchestrator.scheduling.quotas import ShareBook
from orchestrator.scheduling.snapshots import (
    GpuSlot,
    PendingJob,
    Preemption,
    RunningJob,
    SchedulerSettings,
)
from orchestrator.scheduling.turns import Turns


def victim_order(victim: RunningJob) -> tuple[int, float, float, str]:
    # Least urgent first; among equals the latest deadline (none is latest), then the one that
    # started last (the least work at stake).
    return (
        victim.priority,
        -moment_seconds(victim.deadline),
        -moment_seconds(victim.started_at),
        victim.job_id,
    )


class Victims:
    """The running jobs that may give way, least urgent first (see `victim_order`): the first
    one a job may take is the one it takes, and the scan ends at the first one too urgent."""

    def __init__(self, busy: Iterable[GpuSlot], turns: Turns | None = None) -> None:
        """`turns`: who shares GPUs, so a job takes a turn on one only where it may."""
        self._slots = [g for g in busy if g.running is not None and g.running.preemptible]
        self._sorted = False  # sorted when first asked for: most ticks preempt nothing
        self._turns = turns

    def _fits(self, job: PendingJob, gpu: GpuSlot) -> bool:
        return fits(job, gpu) and (self._turns is None or self._turns.admits_instead(job, gpu))

    def weakest(self) -> float:
        return min((_running(g).priority for g in self._slots), default=math.inf)

    def _in_order(self) -> list[GpuSlot]:
        if not self._sorted:
            self._slots.sort(key=lambda g: victim_order(_running(g)))
            self._sorted = True
        return self._slots

    def reclaim_for(self, job: PendingJob, shares: ShareBook) -> Preemption | None:
        """A job of a team within its share takes back a GPU from a team running past its
        own, whatever the borrower's priority; the least urgent borrower gives way."""
        for position, gpu in enumerate(self._in_order()):
            victim = _running(gpu)
            if (
                self._fits(job, gpu)
                and shares.may_reclaim(job.team, gpu.family)
                and shares.borrowing(victim.team, gpu.family)
            ):
                why = (
                    f"team {job.team} reclaims its share of {gpu.family} GPUs from "
                    f"team {victim.team}, which runs past its own"
                )
                return self._take(position, job, why, shares)
        return None

    def preempt_for(
        self, job: PendingJob, settings: SchedulerSettings, shares: ShareBook | None = None
    ) -> Preemption | None:
        """The running job that gives way to `job`, if any may; its GPU is taken."""
        for position, gpu in enumerate(self._in_order()):
            victim = _running(gpu)
            if victim.priority + settings.preemption_margin > job.priority:
                return None  # every one after it is at least as urgent
            # A deadline outranks priority: only a job due no later may take its GPU (in an
            # autoscaled fleet the urgent job gets its own GPU minutes later anyway). Its
            # team's quota must let it have that GPU (a swap within one team always does).
            if (
                self._fits(job, gpu)
                and (
                    victim.deadline is None
                    or moment_seconds(job.deadline) <= moment_seconds(victim.deadline)
                )
                and (
                    shares is None or victim.team == job.team or shares.admits(job.team, gpu.family)
                )
            ):
                why = (
                    f"priority {job.priority} job {job.job_id} needs a GPU; "
                    f"{victim.job_id} has priority {victim.priority}"
                )
                return self._take(position, job, why, shares)
        return None

    def _take(
        self, position: int, job: PendingJob, reason: str, shares: ShareBook | None
    ) -> Preemption:
        """The victim at `position` gives its GPU to `job` (and its team's count with it)."""
        gpu = self._slots.pop(position)
        victim = _running(gpu)
        if shares is not None:
            shares.give_back(victim.team, gpu.family)
            shares.take(job.team, gpu.family)
        return Preemption(victim.job_id, gpu.worker_id, gpu.index, job.job_id, reason)


def _running(gpu: GpuSlot) -> RunningJob:
    assert gpu.running is not None  # only busy GPUs become victims
    return gpu.running
