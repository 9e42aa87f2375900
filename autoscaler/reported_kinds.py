"""The catalogue as the workers report it: every KINDS_REFRESH the autoscaler takes the store's
GPU types, where the control plane lowered a type's memory to what its workers' NVML reports
(ECC on, a driver's reserve), so that it buys by the figure the scheduler assigns by."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

KINDS_REFRESH = timedelta(minutes=10)


@dataclass
class ReportedKinds:
    read_at: datetime | None = None

    def due(self, now: datetime) -> bool:
        return self.read_at is None or now - self.read_at >= KINDS_REFRESH

    def read(self, now: datetime) -> None:
        self.read_at = now
