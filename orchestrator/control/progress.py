"""Each running job's step, from the workers' heartbeats into the store, where the API of any
replica reads it. Written only when a step changed, in one transaction per round."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from kernel.clock import Clock, sleep_unless_stopped
from kernel.errors import FrameFleetError
from kernel.outage import Outage
from kernel.worker_protocol import JobProgress
from orchestrator.store.job_pages import ProgressReport

log = logging.getLogger(__name__)


class ProgressSource(Protocol):
    def progress(self) -> list[tuple[JobProgress, datetime]]: ...


class ProgressSink(Protocol):
    def record_progress(self, reports: Sequence[ProgressReport]) -> None: ...


@dataclass
class ProgressRecorder:
    source: ProgressSource
    sink: ProgressSink
    clock: Clock
    every: float = 2.0
    # Only the leading replica writes (the others hear the same heartbeats).
    leads: Callable[[], bool] = lambda: True
    # job -> (attempt, step) last written: what the workers report now, never more.
    _written: dict[str, tuple[int, int]] = field(default_factory=dict)
    _reported: set[str] = field(default_factory=set)  # jobs the last look found

    def changed(self) -> list[ProgressReport]:
        reports = {
            job.job_id: ProgressReport(job.job_id, job.attempt, job.step, job.total_steps, at)
            for job, at in self.source.progress()
        }
        self._reported = set(reports)
        return [r for r in reports.values() if self._written.get(r.job_id) != (r.attempt, r.step)]

    def write(self, reports: Sequence[ProgressReport]) -> None:
        """Blocking: run in a thread."""
        self.sink.record_progress(reports)

    def remember(self, reports: Sequence[ProgressReport]) -> None:
        self._written = {k: v for k, v in self._written.items() if k in self._reported}
        self._written.update({r.job_id: (r.attempt, r.step) for r in reports})

    async def run(self, stop: asyncio.Event) -> None:
        outage = Outage("the store, for progress", log, self.clock)
        while not stop.is_set():
            reports = self.changed() if self.leads() else []
            wait = self.every
            try:
                if reports:
                    await asyncio.to_thread(self.write, reports)
                self.remember(reports)
                outage.answered()
            except FrameFleetError as error:
                wait = max(wait, outage.failed(error))
            except Exception:
                # A bug, not an input: the control plane's other loops go on without it.
                log.exception("progress not recorded, retrying")
            await sleep_unless_stopped(self.clock, stop, wait)
