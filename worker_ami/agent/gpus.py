"""The agent's GPUs, from its NVML port: the slots it offers and the health each heartbeat
carries. A slot is a whole GPU, a MIG instance of one (where the operator turned MIG on: each
instance has memory and compute of its own, so it takes a job of its own), or a CPU slot where
there is no GPU."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from kernel.market import family_of_gpu, mig_family
from kernel.worker_protocol import GpuHealth, GpuInfo
from worker_ami.agent.settings import WorkerSettings
from worker_ami.agent.telemetry import GpuReadings, GpuTelemetry, NvmlUnavailable

GIB = 1024**3
# How a MIG instance is named as a device: CUDA opens it by its UUID, seen as the process's
# only GPU (CUDA_VISIBLE_DEVICES), not by an index of the machine's.
MIG_DEVICE = "cuda:MIG-"
# An A100's or H100's compute in MIG slices: a 3g instance has 3/7 of its GPU.
MIG_COMPUTE_SLICES = 7


@dataclass(frozen=True)
class DetectedSlot:
    gpu: GpuInfo  # what the hello offers (its index is the slot's, numbered in NVML order)
    device: str  # cpu, cuda:<index> or cuda:MIG-<uuid>
    # The physical GPU, whose health the slot reports (a CPU slot reads the GPU of its number,
    # which only a fake NVML has).
    nvml_index: int
    mig_uuid: str | None = None


def detect_gpus(readings: GpuReadings, settings: WorkerSettings) -> list[DetectedSlot]:
    """One slot per GPU NVML lists (`jobs_per_gpu` of them, sharing it), or per MIG instance of
    a GPU in MIG mode; CPU slots where there is none or the device is `cpu`. Slots are
    numbered in NVML order: on a machine without MIG or sharing a slot's number is its GPU's
    index, as before."""
    gpus = readings.read()
    if settings.device == "cpu" or isinstance(gpus, NvmlUnavailable) or not gpus:
        return [
            DetectedSlot(
                GpuInfo(index=i, family=settings.cpu_family, vram_gib=settings.cpu_vram_gib),
                "cpu",
                i,
            )
            for i in range(settings.cpu_slots)
        ]
    slots: list[DetectedSlot] = []
    for g in sorted(gpus, key=lambda g: g.index):
        family = family_of_gpu(g.name)
        if not g.mig or not settings.mig_slots:
            shares = settings.jobs_per_gpu
            for _ in range(shares):
                info = GpuInfo(
                    index=len(slots),
                    family=family,
                    vram_gib=g.memory_total_bytes / GIB / shares,
                    compute_share=1 / shares,
                    time_shared=shares > 1,
                )
                slots.append(DetectedSlot(info, f"cuda:{g.index}", g.index))
            continue
        for mig in g.mig:
            info = GpuInfo(
                index=len(slots),
                family=mig_family(family, mig.slices),
                vram_gib=mig.memory_total_bytes / GIB,
                physical=g.index,
                compute_share=compute_share(mig.slices, len(g.mig)),
            )
            device = MIG_DEVICE + mig.uuid.removeprefix("MIG-")
            slots.append(DetectedSlot(info, device, g.index, mig.uuid))
    split = any(slot.mig_uuid for slot in slots) or settings.jobs_per_gpu > 1
    if split:  # the ledger and the control plane need each slot's GPU: say it of all
        slots = [
            replace(slot, gpu=slot.gpu.model_copy(update={"physical": slot.nvml_index}))
            for slot in slots
        ]
    return slots


def compute_share(slices: int, instances: int) -> float:
    """A MIG instance's part of its GPU: its slices of seven, or where NVML does not say, an
    even part of the GPU's instances."""
    return min(1.0, slices / MIG_COMPUTE_SLICES) if slices > 0 else 1.0 / max(1, instances)


def health_of(readings: GpuReadings, slots: Sequence[DetectedSlot]) -> tuple[GpuHealth, ...]:
    """What NVML says of the slots' GPUs now (nothing in CPU mode without a fake). A MIG
    slot carries its GPU's utilisation, temperature and errors and its own memory in use."""
    gpus = readings.read()
    if isinstance(gpus, NvmlUnavailable):
        return ()
    by_index: Mapping[int, GpuTelemetry] = {g.index: g for g in gpus}
    health = []
    for slot in slots:
        g = by_index.get(slot.nvml_index)
        if g is None:
            continue
        used = g.memory_used_bytes
        if slot.mig_uuid is not None:
            mig = next((m for m in g.mig if m.uuid == slot.mig_uuid), None)
            if mig is None:
                continue  # the instance went away (the operator changed MIG): no reading
            used = mig.memory_used_bytes
        health.append(
            GpuHealth(
                index=slot.gpu.index,
                utilization_percent=max(0, min(100, g.utilization_percent)),
                memory_used_gib=used / GIB,
                temperature_celsius=g.temperature_celsius,
                ecc_uncorrected_errors=g.ecc_uncorrected_errors,
                xid_errors=g.xid_errors[:32],
                throttle_reasons=g.throttle_reasons,
            )
        )
    return tuple(health)


def process_device(device: str) -> tuple[str, dict[str, str]]:
    """The device a render process opens and the environment it needs for it: a MIG instance
    is its only visible GPU, so it opens cuda:0."""
    if device.startswith(MIG_DEVICE):
        return "cuda:0", {"CUDA_VISIBLE_DEVICES": device.removeprefix("cuda:")}
    return device, {}
