"""GPU telemetry through NVML (nvidia-ml-py), with a clean answer on machines without a driver."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import pynvml


@dataclass(frozen=True)
class GpuTelemetry:
    index: int
    name: str
    utilization_percent: int
    memory_used_bytes: int
    memory_total_bytes: int
    temperature_celsius: int
    ecc_uncorrected_errors: int | None  # None where ECC is off or unsupported

    @property
    def memory_free_bytes(self) -> int:
        return self.memory_total_bytes - self.memory_used_bytes


@dataclass(frozen=True)
class NvmlUnavailable:
    reason: str


def _ecc_errors(handle: object) -> int | None:
    try:
        return int(
            pynvml.nvmlDeviceGetTotalEccErrors(
                handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC
            )
        )
    except pynvml.NVMLError:
        return None


def read_gpus() -> list[GpuTelemetry] | NvmlUnavailable:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        return NvmlUnavailable(f"no NVIDIA driver: {error}")
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            name = pynvml.nvmlDeviceGetName(handle)
            gpus.append(
                GpuTelemetry(
                    index=index,
                    name=name.decode() if isinstance(name, bytes) else str(name),
                    utilization_percent=int(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu),
                    memory_used_bytes=int(memory.used),
                    memory_total_bytes=int(memory.total),
                    temperature_celsius=int(
                        pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
                    ),
                    ecc_uncorrected_errors=_ecc_errors(handle),
                )
            )
        return gpus
    except pynvml.NVMLError as error:
        return NvmlUnavailable(f"NVML query failed: {error}")
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
