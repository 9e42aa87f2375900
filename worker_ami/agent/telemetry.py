"""GPU telemetry through NVML (nvidia-ml-py), with a clean answer on machines without a driver."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from typing import Any, Protocol

import pynvml


@dataclass(frozen=True)
class MigInstance:
    """A MIG instance of a GPU: a slice with its own memory and compute, which CUDA opens by
    its UUID (CUDA_VISIBLE_DEVICES=MIG-...)."""

    uuid: str
    memory_total_bytes: int
    memory_used_bytes: int = 0
    # Its share of the GPU's compute, in slices (of 7 on an A100 or H100); 0: not known.
    slices: int = 0


@dataclass(frozen=True)
class GpuTelemetry:
    index: int
    name: str
    utilization_percent: int
    memory_used_bytes: int
    memory_total_bytes: int
    temperature_celsius: int
    ecc_uncorrected_errors: int | None  # None where ECC is off or unsupported
    xid_errors: tuple[int, ...] = ()  # critical XIDs since the last reading
    throttle_reasons: int = 0  # nvmlDeviceGetCurrentClocksThrottleReasons
    # Its MIG instances where MIG mode is on (read, never changed: that is the operator's).
    mig: tuple[MigInstance, ...] = ()

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


class GpuReadings(Protocol):
    """The agent's port to NVML: what each GPU looks like now (tests give a fake)."""

    def read(self) -> list[GpuTelemetry] | NvmlUnavailable: ...


def mig_instances(handle: object, nvml: Any = pynvml) -> tuple[MigInstance, ...]:
    """The GPU's MIG instances; none where MIG is off or the GPU has no MIG. `nvml`: the
    library (the tests give a fake of these few calls)."""
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
        if current != pynvml.NVML_DEVICE_MIG_ENABLE:
            return ()
        most = int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))
    except pynvml.NVMLError:
        return ()
    instances = []
    for position in range(most):
        try:
            mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, position)
        except pynvml.NVMLError:
            continue  # no instance at this position
        try:
            memory = nvml.nvmlDeviceGetMemoryInfo(mig)
            uuid = nvml.nvmlDeviceGetUUID(mig)
        except pynvml.NVMLError:
            continue
        try:
            slices = int(nvml.nvmlDeviceGetAttributes(mig).gpuInstanceSliceCount)
        except pynvml.NVMLError:
            slices = 0
        instances.append(
            MigInstance(
                uuid=uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                memory_total_bytes=int(memory.total),
                memory_used_bytes=int(memory.used),
                slices=slices,
            )
        )
    return tuple(instances)


def _throttle_reasons(handle: object) -> int:
    try:
        return int(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))
    except pynvml.NVMLError:
        return 0


class Nvml:
    """NVML through nvidia-ml-py. XID errors arrive as events: the first reading registers
    for critical ones on every GPU, each later reading collects what came since."""

    def __init__(self) -> None:
        self._events: object | None = None
        self._initialised = False

    def read(self) -> list[GpuTelemetry] | NvmlUnavailable:
        gpus = read_gpus()
        if isinstance(gpus, NvmlUnavailable) or not gpus:
            return gpus
        xids = self._xids(len(gpus))
        return [replace(g, xid_errors=tuple(xids.get(g.index, ()))) for g in gpus]

    def _xids(self, count: int) -> dict[int, list[int]]:
        seen: dict[int, list[int]] = {}
        try:
            if not self._initialised:
                pynvml.nvmlInit()  # kept for the events; read_gpus's own init nests inside
                self._initialised = True
                self._events = pynvml.nvmlEventSetCreate()
                for index in range(count):
                    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                    pynvml.nvmlDeviceRegisterEvents(
                        handle, pynvml.nvmlEventTypeXidCriticalError, self._events
                    )
            while True:
                event = pynvml.nvmlEventSetWait(self._events, 0)
                index = int(pynvml.nvmlDeviceGetIndex(event.device))
                seen.setdefault(index, []).append(int(event.eventData))
        except pynvml.NVMLError:
            return seen  # a timeout ends the wait; no event support reads as none


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
                    throttle_reasons=_throttle_reasons(handle),
                    mig=mig_instances(handle),
                )
            )
        return gpus
    except pynvml.NVMLError as error:
        return NvmlUnavailable(f"NVML query failed: {error}")
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
