"""MIG: each MIG instance NVML reports is a slot of its own, with its memory and a family of its
own (a slice's pace is not its whole GPU's), read through a fake NVML (no MIG setting of a real
GPU is ever changed); the scheduler fits jobs to those slots by memory like whole GPUs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from types import SimpleNamespace

import pynvml

from kernel.market import mig_family
from orchestrator.scheduling.policy import schedule
from orchestrator.scheduling.snapshots import GpuSlot, PendingJob, WorkerSnapshot
from worker_ami.agent.gpus import (
    DetectedSlot,
    compute_share,
    detect_gpus,
    health_of,
    process_device,
)
from worker_ami.agent.settings import WorkerSettings
from worker_ami.agent.telemetry import GpuTelemetry, MigInstance, mig_instances

GIB = 1024**3
NOW = datetime(2026, 12, 5, 12, tzinfo=UTC)
SMALL_A, SMALL_B, LARGE = (
    "MIG-4f1c2b8e-0000-5000-8000-00000000000a",
    "MIG-4f1c2b8e-0000-5000-8000-00000000000b",
    "MIG-4f1c2b8e-0000-5000-8000-00000000000c",
)


@dataclass
class TwoA100s:
    """GPU 0 split by its operator into two 1g.10gb and one 3g.40gb instance; GPU 1 whole."""

    used_on_large: int = 0

    def read(self) -> list[GpuTelemetry]:
        split = (
            MigInstance(SMALL_A, 10 * GIB, 1 * GIB, slices=1),
            MigInstance(SMALL_B, 10 * GIB, slices=1),
            MigInstance(LARGE, 40 * GIB, self.used_on_large, slices=3),
        )
        return [
            GpuTelemetry(1, "NVIDIA A100-SXM4-80GB", 10, 5 * GIB, 80 * GIB, 40, 0),
            GpuTelemetry(0, "NVIDIA A100-SXM4-80GB", 70, 30 * GIB, 80 * GIB, 55, 0, mig=split),
        ]


def settings(mig_slots: bool = True) -> WorkerSettings:
    return WorkerSettings(worker_id="w-mig", device="cuda", mig_slots=mig_slots)


def test_each_mig_instance_is_a_slot_with_its_own_memory_numbered_in_nvml_order() -> None:
    slots = detect_gpus(TwoA100s(), settings())
    assert [(s.gpu.index, s.gpu.family, s.gpu.vram_gib, s.nvml_index) for s in slots] == [
        (0, "a100mig1", 10.0, 0),
        (1, "a100mig1", 10.0, 0),
        (2, "a100mig3", 40.0, 0),
        (3, "a100", 80.0, 1),
    ]
    assert [s.device for s in slots] == [
        "cuda:" + SMALL_A,
        "cuda:" + SMALL_B,
        "cuda:" + LARGE,
        "cuda:1",
    ]


def test_each_slot_says_its_gpu_and_part_of_it_for_the_ledger() -> None:
    slots = detect_gpus(TwoA100s(), settings())
    assert [(s.gpu.physical, round(s.gpu.compute_share, 3)) for s in slots] == [
        (0, round(1 / 7, 3)),
        (0, round(1 / 7, 3)),
        (0, round(3 / 7, 3)),
        (1, 1.0),  # a whole GPU beside split ones names itself too
    ]
    assert compute_share(0, 3) == 1 / 3  # NVML gave no slices: the GPU's instances alike


def test_mig_slots_are_on_by_default_and_the_operator_may_turn_them_off() -> None:
    """Off: each GPU is one slot, as on a machine without MIG, and nothing is said of its
    part (a hello of before)."""
    assert WorkerSettings(worker_id="w").mig_slots is True
    slots = detect_gpus(TwoA100s(), settings(mig_slots=False))
    assert [(s.gpu.index, s.gpu.family, s.device, s.gpu.physical) for s in slots] == [
        (0, "a100", "cuda:0", None),
        (1, "a100", "cuda:1", None),
    ]


def test_a_slice_is_a_family_of_its_own_within_the_protocols_length() -> None:
    assert mig_family("h100", 2) == "h100mig2"
    assert mig_family("a100", 0) == "a100mig"  # slices not reported
    long = mig_family("nvidiafuturegpu9", 7)
    assert long == "nvidiafuturemig7"
    assert len(long) <= 16


def test_a_machine_without_mig_keeps_one_slot_per_gpu_at_its_index() -> None:
    class Whole:
        def read(self) -> list[GpuTelemetry]:
            return [GpuTelemetry(i, "NVIDIA L40S", 0, 0, 48 * GIB, 40, 0) for i in range(2)]

    slots = detect_gpus(Whole(), settings())
    assert [(s.gpu.index, s.device, s.mig_uuid) for s in slots] == [
        (0, "cuda:0", None),
        (1, "cuda:1", None),
    ]


def test_a_render_process_sees_its_mig_instance_as_its_only_gpu() -> None:
    assert process_device("cuda:" + LARGE) == ("cuda:0", {"CUDA_VISIBLE_DEVICES": LARGE})
    assert process_device("cuda:1") == ("cuda:1", {})
    assert process_device("cpu") == ("cpu", {})


def test_a_mig_slots_health_is_its_gpus_with_its_own_memory_in_use() -> None:
    nvml = TwoA100s(used_on_large=12 * GIB)
    slots = detect_gpus(nvml, settings())
    health = {h.index: h for h in health_of(nvml, slots)}
    assert (health[2].memory_used_gib, health[2].utilization_percent) == (12.0, 70)
    assert (health[3].memory_used_gib, health[3].temperature_celsius) == (5.0, 40)
    gone = [*slots, DetectedSlot(slots[0].gpu.model_copy(update={"index": 9}), "x", 0, "MIG-x")]
    assert 9 not in {h.index for h in health_of(nvml, gone)}  # an instance that went away


def test_jobs_fit_mig_slots_by_memory_smallest_first() -> None:
    slots = detect_gpus(TwoA100s(), settings())
    worker = WorkerSnapshot(
        "w-mig",
        tuple(GpuSlot("w-mig", s.gpu.index, s.gpu.family, s.gpu.vram_gib) for s in slots),
    )
    jobs = [
        PendingJob("needs-60", 5, None, NOW, 60.0, frozenset()),
        PendingJob("needs-30", 5, None, NOW, 30.0, frozenset()),
        PendingJob("needs-8", 5, None, NOW, 8.0, frozenset()),
        PendingJob("needs-9", 5, None, NOW, 9.0, frozenset()),
    ]
    placed = {a.job_id: a.gpu_index for a in schedule(jobs, [worker], NOW).assignments}
    assert placed == {"needs-60": 3, "needs-30": 2, "needs-8": 0, "needs-9": 1}
    # A job that names the whole GPU's family is not put on a slice of it.
    whole_only = PendingJob("a100-only", 5, None, NOW, 8.0, frozenset({"a100"}))
    placed = {a.job_id: a.gpu_index for a in schedule([whole_only], [worker], NOW).assignments}
    assert placed == {"a100-only": 3}


class _FakeNvmlLibrary(SimpleNamespace):
    """The six NVML calls MIG discovery makes, over a table: position -> (uuid, total,
    used); a missing position raises as NVML does for an empty one."""

    def __init__(self, mode: int, table: dict[int, tuple[bytes, int, int]], most: int) -> None:
        super().__init__()
        self.mode, self.table, self.most = mode, table, most

    def nvmlDeviceGetMigMode(self, _handle: object) -> tuple[int, int]:
        return self.mode, self.mode

    def nvmlDeviceGetMaxMigDeviceCount(self, _handle: object) -> int:
        return self.most

    def nvmlDeviceGetMigDeviceHandleByIndex(self, _handle: object, position: int) -> int:
        if position not in self.table:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return position

    def nvmlDeviceGetMemoryInfo(self, position: int) -> SimpleNamespace:
        _uuid, total, used = self.table[position]
        return SimpleNamespace(total=total, used=used)

    def nvmlDeviceGetUUID(self, position: int) -> bytes:
        return self.table[position][0]

    def nvmlDeviceGetAttributes(self, position: int) -> SimpleNamespace:
        if position == 3:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(gpuInstanceSliceCount=1)


def test_mig_discovery_reads_the_instances_nvml_lists_and_skips_empty_positions() -> None:
    table = {0: (SMALL_A.encode(), 10 * GIB, GIB), 3: (LARGE.encode(), 40 * GIB, 0)}
    on = _FakeNvmlLibrary(pynvml.NVML_DEVICE_MIG_ENABLE, table, most=7)
    assert mig_instances(object(), on) == (
        MigInstance(SMALL_A, 10 * GIB, GIB, slices=1),
        MigInstance(LARGE, 40 * GIB, 0, slices=0),  # its slices not reported
    )
    off = _FakeNvmlLibrary(pynvml.NVML_DEVICE_MIG_DISABLE, table, most=7)
    assert mig_instances(object(), off) == ()
