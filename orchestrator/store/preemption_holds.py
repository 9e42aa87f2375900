"""The GPUs preemptions are freeing, each for one job (see `PreemptionHoldRow`): written by the
leader as its ticks decide them, read back by whichever replica leads next."""

from __future__ import annotations

from collections.abc import Mapping

from sqlmodel import delete, select

from orchestrator.store.base import StoreBase
from orchestrator.store.leases import Fence, check_fence
from orchestrator.store.tables import PreemptionHoldRow

Slot = tuple[str, int]  # (worker, GPU index)


class PreemptionHoldBook(StoreBase):
    def preemption_holds(self) -> dict[Slot, str]:
        with self._session() as session:
            rows = session.exec(select(PreemptionHoldRow)).all()
        return {(row.worker_id, row.gpu_index): row.job_id for row in rows}

    def keep_preemption_holds(self, holds: Mapping[Slot, str], fence: Fence | None = None) -> None:
        """The holds are now exactly `holds` (the leader's whole view after a tick)."""
        now = self._clock.now()
        with self._session() as session:
            if fence is not None:
                check_fence(session, fence)
            session.exec(delete(PreemptionHoldRow))
            for (worker_id, gpu_index), job_id in holds.items():
                session.add(
                    PreemptionHoldRow(
                        worker_id=worker_id, gpu_index=gpu_index, job_id=job_id, since=now
                    )
                )
            session.commit()
