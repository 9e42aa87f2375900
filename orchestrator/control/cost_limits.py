"""A job's cost limit (`max_cost_usd`): once what it cost so far (the ledger's lines of it,
across its attempts, waste included) reaches the limit, it is cancelled with the reason, and
its worker stops it at the next step boundary (`cancel`). Read at most once a minute per job:
a job's cost moves by cents a minute."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal

from kernel.clock import Clock
from kernel.errors import FrameFleetError
from kernel.job_record import Placement
from orchestrator.control.cancel import CancelStore, cancel_job

log = logging.getLogger(__name__)
EVERY = timedelta(minutes=1)
JobCost = Callable[[str], Decimal | None]  # USD a job cost so far; None: it never ran


class CostLimits:
    def __init__(self, store: CancelStore, job_cost: JobCost, clock: Clock, actor: str) -> None:
        self._store, self._job_cost, self._clock, self._actor = store, job_cost, clock, actor
        self._read_at: dict[str, datetime] = {}  # job -> when its cost was last read

    async def step(self, placements: list[Placement]) -> list[str]:
        """Cancels the running jobs whose cost reached their limit; returns them."""
        now = self._clock.now()
        limited = {p.job.job_id: p.job for p in placements if p.job.spec.max_cost_usd}
        self._read_at = {j: at for j, at in self._read_at.items() if j in limited}
        cancelled = []
        for job_id, job in limited.items():
            if now - self._read_at.get(job_id, datetime.min.replace(tzinfo=now.tzinfo)) < EVERY:
                continue
            self._read_at[job_id] = now
            spent = await asyncio.to_thread(self._job_cost, job_id)
            limit = job.spec.max_cost_usd
            if spent is None or limit is None or spent < Decimal(str(limit)):
                continue
            reason = f"its cost limit of ${limit:,.2f} is reached (${spent:,.2f} so far)"
            try:
                await asyncio.to_thread(cancel_job, self._store, job_id, reason, self._actor)
            except FrameFleetError as error:  # ended or moved meanwhile: the next look decides
                log.info("job %s not cancelled for its cost limit: %s", job_id, error)
                continue
            log.warning("job %s cancelled: %s", job_id, reason)
            cancelled.append(job_id)
        return cancelled
