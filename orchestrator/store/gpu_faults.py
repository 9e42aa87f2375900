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
        """(worker, GPU) of every quarantine: few rows, whatever the fleet's size."""
        with self._session() as session:
            rows = session.exec(
                select(GpuFaultRow.worker_id, GpuFaultRow.gpu_index).where(
                    col(GpuFaultRow.kind) == GpuFaultKind.QUARANTINE.value
                )
            ).all()
        return {(worker_id, gpu_index) for worker_id, gpu_index in rows}


def _fault(row: GpuFaultRow) -> GpuFault:
    kind = GpuFaultKind(row.kind)
    return GpuFault(
        row.worker_id, row.instance_id, row.gpu_index, kind, row.detail, utc(row.at), row.job_id
    )
