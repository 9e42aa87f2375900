"""A worker's hello as the protocol's own model."""

from __future__ import annotations

from datetime import UTC, datetime

from kernel.instance_types import L40S_GIB
from kernel.worker_protocol import (
    GpuInfo,
    Hello,
)


def hello(worker_id: str = "w1") -> Hello:
    return Hello(
        worker_id=worker_id,
        sent_at=NOW,
        instance_id="i-0123456789abcdef0",
        instance_type="g6e.xlarge",
        availability_zone="us-east-1a",
        market="spot",
        gpus=(GpuInfo(index=0, family="l40s", vram_gib=L40S_GIB),),  # as NVML reports it
        agent_version="0.1.0",
    )


NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
