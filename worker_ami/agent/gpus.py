"""The agent's GPUs, from its NVML port: the slots it offers (one per GPU, or CPU slots where
there is none) and the health each heartbeat carries."""

from __future__ import annotations

from kernel.market import family_of_gpu
from kernel.worker_protocol import GpuHealth, GpuInfo
from worker_ami.agent.settings import WorkerSettings
from worker_ami.agent.telemetry import GpuReadings, NvmlUnavailable

GIB = 1024**3


def detect_gpus(readings: GpuReadings, settings: WorkerSettings) -> list[tuple[GpuInfo, str]]:
    """One slot per GPU NVML lists; CPU slots where there is none or the device is `cpu`."""
    gpus = readings.read()
    if settings.device == "cpu" or isinstance(gpus, NvmlUnavailable) or not gpus:
        return [
            (GpuInfo(index=i, family=settings.cpu_family, vram_gib=settings.cpu_vram_gib), "cpu")
            for i in range(settings.cpu_slots)
        ]
    return [
        (
            GpuInfo(
                index=g.index, family=family_of_gpu(g.name), vram_gib=g.memory_total_bytes / GIB
            ),
            f"cuda:{g.index}",
        )
        for g in gpus
    ]


def health_of(readings: GpuReadings, indexes: list[int]) -> tuple[GpuHealth, ...]:
    """What NVML says of the slots' GPUs now (nothing in CPU mode without a fake)."""
    gpus = readings.read()
    if isinstance(gpus, NvmlUnavailable):
        return ()
    return tuple(
        GpuHealth(
            index=g.index,
            utilization_percent=max(0, min(100, g.utilization_percent)),
            memory_used_gib=g.memory_used_bytes / GIB,
            temperature_celsius=g.temperature_celsius,
            ecc_uncorrected_errors=g.ecc_uncorrected_errors,
            xid_errors=g.xid_errors[:32],
            throttle_reasons=g.throttle_reasons,
        )
        for g in gpus
        if g.index in indexes
    )
