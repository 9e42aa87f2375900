"""A job's GPU need comes from its model's recorded memory need per dtype and resolution class;
a producer's `gpu.min_vram_gib` can only raise it. The scheduler, the autoscaler and the
worker's preflight all read the same need."""

from __future__ import annotations

from datetime import UTC, datetime

from autoscaler.demand import demand_of
from kernel.clock import FakeClock
from kernel.job_record import JobRecord
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.model_memory import BUILT_IN, gpu_need_gib, resolution_class
from kernel.precision import Dtype
from orchestrator.control.scheduling_view import pending_jobs
from orchestrator.scheduling.registry import WorkerRegistry
from tests.support.jobs import job_dict

NOW = datetime(2026, 6, 1, tzinfo=UTC)
WAN_14B_480P = {"model": "wan/wan2.1-t2v-14b", "width": 832, "height": 480, "num_frames": 81}


def test_a_14b_job_needs_a_gpu_that_holds_it_whatever_its_hint() -> None:
    spec = parse_job(job_dict("big", **WAN_14B_480P), now=None)  # the default hint: 16 GiB
    need = gpu_need_gib(spec)
    assert need == BUILT_IN[("wan/wan2.1-t2v-14b", Dtype.BF16, "480p")]
    assert 40 < need <= 48  # an L40S holds it; no 24 GB GPU does
    # Everyone reads that need: the autoscaler buys no GPU smaller, the scheduler places it on
    # none, the worker's preflight refuses one.
    assert demand_of(spec, NOW, None).min_vram_gib == need
    record = JobRecord("big", JobState.QUEUED, 1, 0, 5, None, spec, NOW, NOW)
    [pending] = pending_jobs([record], {}, WorkerRegistry(FakeClock(NOW)), NOW)
    assert pending.min_vram_gib == need


def test_the_producers_hint_only_raises_the_need() -> None:
    roomy = parse_job(job_dict("roomy", gpu={"min_vram_gib": 80}, **WAN_14B_480P), now=None)
    assert gpu_need_gib(roomy) == 80
    unknown = parse_job(job_dict("tiny", gpu={"min_vram_gib": 12}), now=None)
    assert gpu_need_gib(unknown) == 12  # no recorded need: the hint is all there is


def test_resolution_classes() -> None:
    assert [resolution_class(w, h) for w, h in ((832, 480), (1280, 720), (4096, 4096))] == [
        "480p",
        "720p",
        None,
    ]
