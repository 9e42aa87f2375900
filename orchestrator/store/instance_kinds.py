"""The GPU instance types EC2 described, written by the autoscaler at start and read by the
control plane (to vet a worker's hello) and by an autoscaler that cannot reach EC2."""

from __future__ import annotations

from collections.abc import Iterable

from sqlmodel import select

from kernel.instance_types import InstanceKind
from kernel.market import GpuFamily
from orchestrator.store.base import StoreBase
from orchestrator.store.tables import InstanceKindRow

KNOWN_FAMILIES = frozenset(family.value for family in GpuFamily)


class InstanceKindBook(StoreBase):
    def record_kinds(self, kinds: Iterable[InstanceKind]) -> None:
        now = self._clock.now()
        with self._session() as session:
            for kind in kinds:
                row = InstanceKindRow(
                    instance_type=kind.instance_type,
                    family=kind.family.value,
                    gpus=kind.gpus,
                    vram_gib=kind.vram_gib,
                    vcpus=kind.vcpus,
                    described_at=now,
                )
                session.merge(row)
            session.commit()

    def lower_memory(self, kind: InstanceKind, reported_gib: float) -> None:
        """A worker of `kind` reported less memory per GPU than it has: the type's figure
        becomes that (never raised by a report)."""
        with self._session() as session:
            row = session.get(InstanceKindRow, kind.instance_type)
            if row is None:
                row = InstanceKindRow(
                    instance_type=kind.instance_type,
                    family=kind.family.value,
                    gpus=kind.gpus,
                    vram_gib=reported_gib,
                    vcpus=kind.vcpus,
                    described_at=self._clock.now(),
                )
            row.vram_gib = min(row.vram_gib, reported_gib)
            session.add(row)
            session.commit()

    def kinds(self) -> list[InstanceKind]:
        with self._session() as session:
            rows = session.exec(select(InstanceKindRow)).all()
        return [
            InstanceKind(r.instance_type, GpuFamily(r.family), r.gpus, r.vram_gib, r.vcpus)
            for r in rows
            if r.family in KNOWN_FAMILIES  # one this version no longer knows is left out
        ]
