"""GPU faults and quarantines, durable so that every replica (and a new leader) keeps work off
a sick GPU."""

from __future__ import annotations

from sqlmodel import col, select

from kernel.fleet_facts import GpuFault, GpuFaultKind
from orchestrator.store.base import StoreBase, utc
from orchestrator.store.tables import GpuFaultRow


class GpuFaultBook(StoreBase):
    def record_gpu_fault(self, fault: GpuFault) -> None:
        with self._session() as session:
            session.add(
                GpuFaultRow(
                    worker_id=fault.worker_id,
                    instance_id=fault.instance_id,
                    gpu_index=fault.gpu_index,
                    kind=fault.kind.value,
                    detail=fault.detail[:2000],
                    job_id=fault.job_id,
                    at=fault.at,
                )
            )
            session.commit()

    def gpu_faults(self, worker_id: str | None = None) -> list[GpuFault]:
        query = select(GpuFaultRow).order_by(col(GpuFaultRow.id))
        if worker_id is not None:
            query = query.where(col(GpuFaultRow.worker_id) == worker_id)
        with self._session() as session:
            rows = session.exec(query).all()
        return [_fault(r) for r in rows]

    def quarantined_gpus(self) -> set[tuple[str, int]]:
        """(worker, GPU) of every quarantine not released since: few rows, whatever the
        fleet's size."""
        marks = (GpuFaultKind.QUARANTINE.value, GpuFaultKind.RELEASE.value)
        with self._session() as session:
            rows = session.exec(
                select(GpuFaultRow.worker_id, GpuFaultRow.gpu_index, GpuFaultRow.kind)
                .where(col(GpuFaultRow.kind).in_(marks))
                .order_by(col(GpuFaultRow.id))
            ).all()
        last = {(worker_id, gpu_index): kind for worker_id, gpu_index, kind in rows}
        return {slot for slot, kind in last.items() if kind == GpuFaultKind.QUARANTINE.value}

    def release_gpu(self, worker_id: str, gpu_index: int, actor: str) -> GpuFault | None:
        """Lift a quarantine (an operator judged the GPU sound): the release is recorded as
        a fault row, so the GPU's record keeps both; its faults before it no longer count.
        None when the GPU is not quarantined."""
        marks = (GpuFaultKind.QUARANTINE, GpuFaultKind.RELEASE)
        found = [
            f for f in self.gpu_faults(worker_id) if f.gpu_index == gpu_index and f.kind in marks
        ]
        if not found or found[-1].kind is not GpuFaultKind.QUARANTINE:
            return None
        quarantine = found[-1]
        release = GpuFault(
            worker_id,
            quarantine.instance_id,
            gpu_index,
            GpuFaultKind.RELEASE,
            f"released by {actor}",
            self._clock.now(),
        )
        self.record_gpu_fault(release)
        return release


def _fault(row: GpuFaultRow) -> GpuFault:
    kind = GpuFaultKind(row.kind)
    return GpuFault(
        row.worker_id, row.instance_id, row.gpu_index, kind, row.detail, utc(row.at), row.job_id
    )
