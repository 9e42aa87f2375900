"""The throughput model learns each finished job's pace on its instance's GPU family, from the
jobs that finished since it last looked (the last day's at the first look: a restart keeps what
was measured)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from autoscaler.demand import FinishedWork
from autoscaler.throughput import ThroughputModel
from kernel.market import GpuFamily

log = logging.getLogger(__name__)
# How often it looks for newly finished jobs (a query each time).
LEARN_EVERY = timedelta(minutes=1)


@dataclass
class ThroughputLearning:
    model: ThroughputModel
    # Finished jobs up to here have taught the model (None: not started yet).
    learned_until: datetime | None = None
    learned_at: datetime | None = None  # when it last looked

    def learn(
        self,
        finished_since: Callable[[datetime], list[FinishedWork]],
        family_of: Callable[[str], GpuFamily | None],
        now: datetime,
    ) -> None:
        """`family_of`: the GPU family of the instance a worker ran on (None: not one of this
        fleet's instances, or long forgotten)."""
        if self.learned_at is not None and now - self.learned_at < LEARN_EVERY:
            return
        self.learned_at = now
        since = self.learned_until or now - timedelta(days=1)
        for work in finished_since(since):
            since = max(since, work.finished_at)
            family = family_of(work.worker_id)
            if family is None:
                continue
            before = self.model.seconds_per_step(work.shape, family)
            self.model.observe(work.shape, family, work.steps, work.seconds)
            log.info(
                "throughput on %s for %s: %.3f s/step measured, %.3f -> %.3f s/step",
                family,
                work.shape.model,
                work.seconds / work.steps,
                before,
                self.model.seconds_per_step(work.shape, family),
            )
        self.learned_until = since
