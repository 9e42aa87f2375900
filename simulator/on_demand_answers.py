"""Whether an "on-demand" answer is acted on at once (issue 47): every time the market rule
answers on-demand for a queued job, the simulation notes it, and after the run each such job's
next start is held to its answer plus one start-up (boot, model load) and one round.

A late start is what the fleet saw when it happened: the answer was given and nothing bought
on it, the instance bought went to another job, or a later round changed its mind."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from autoscaler.deadline import MarketChoice, MarketRule
from autoscaler.snapshot import JobDemand, PurchaseSettings
from kernel.market import Market


@dataclass
class OnDemandAnswers:
    """A market rule that keeps, per job, when it was first answered on-demand while queued
    (since its last start)."""

    rule: MarketRule
    answered_at: dict[str, list[datetime]] = field(default_factory=dict)

    def __call__(
        self,
        job: JobDemand,
        now: datetime,
        on_demand_seconds_left: float,
        settings: PurchaseSettings,
        startup_seconds: float | None = None,
    ) -> MarketChoice:
        choice = self.rule(job, now, on_demand_seconds_left, settings, startup_seconds)
        # A free GPU's own start-up (`startup_seconds`) or a running job's move back to spot
        # asks another question: only a queued job's own answer counts.
        if choice.market is Market.ON_DEMAND and startup_seconds is None and not job.running_on:
            times = self.answered_at.setdefault(job.job_id, [])
            if not times or times[-1] != now:
                times.append(now)
        return choice

    def late_starts(
        self, starts: Iterable[tuple[str, datetime]], allowed: timedelta, end: datetime
    ) -> list[tuple[str, float]]:
        """(job, hours past its allowance) for each job whose first answer since its last
        start came more than `allowed` before its next start (or before `end`, the run's, where
        it never started again)."""
        started: dict[str, list[datetime]] = {}
        for job_id, at in starts:
            started.setdefault(job_id, []).append(at)
        late = []
        for job_id, answers in self.answered_at.items():
            begun = sorted(started.get(job_id, []))
            for answer in _first_answers(answers, begun):
                after = next((at for at in begun if at >= answer), end)
                if after - answer > allowed:
                    late.append((job_id, (after - answer - allowed).total_seconds() / 3600))
        return late


def _first_answers(answers: list[datetime], starts: list[datetime]) -> list[datetime]:
    """The first answer in each stretch between two starts (`starts` sorted)."""
    firsts: dict[int, datetime] = {}
    for answer in sorted(answers):
        firsts.setdefault(bisect_right(starts, answer), answer)
    return list(firsts.values())
