"""What an operator reads besides jobs and money (issue 49): a job's logs, each attempt's lines
as its worker wrote them beside the video, and the GPUs' health (faults and quarantines), the
same the console shows; and an operator's release of a quarantined GPU."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path
from pydantic import BaseModel

from kernel.fleet_facts import GpuFault
from kernel.worker_protocol import WORKER_ID_PATTERN
from orchestrator.api.jobs_routes import ERRORS, job_detail
from orchestrator.api.models import JobDetail
from orchestrator.api.ports import ApiServices
from orchestrator.api.security import Administrator, Operator, Reader, Services

router = APIRouter(prefix="/v1", tags=["operations"])
LOG_BYTES = 256 * 1024  # of each attempt's log
MAX_LOGGED_ATTEMPTS = 10  # the newest attempts' logs are given
MAX_FAULTS = 500  # the newest
WorkerId = Annotated[str, Path(pattern=WORKER_ID_PATTERN)]
GpuIndex = Annotated[int, Path(ge=0, le=63)]


class AttemptLog(BaseModel):
    attempt: int
    log: str  # the worker's lines, as text: a client escapes them before showing them


class JobLogs(BaseModel):
    job_id: str
    attempts: list[AttemptLog]


class GpuFaultOut(BaseModel):
    worker_id: str
    instance_id: str
    gpu_index: int
    kind: str
    detail: str
    at: datetime
    job_id: str | None


class QuarantinedGpu(BaseModel):
    worker_id: str
    gpu_index: int


class GpuHealth(BaseModel):
    faults: list[GpuFaultOut]
    quarantined: list[QuarantinedGpu]


def attempt_logs(services: ApiServices, job: JobDetail) -> list[tuple[int, str]]:
    """Each attempt's log lines the worker wrote beside the video (newest attempt last)."""
    if services.read_text is None:
        return []
    logs = []
    for attempt in range(max(1, job.attempt - MAX_LOGGED_ATTEMPTS + 1), job.attempt + 1):
        text = services.read_text(*job.spec.attempt_log(attempt), LOG_BYTES)
        if text is not None:
            logs.append((attempt, text))
    return logs


@router.get(
    "/jobs/{job_id}/logs",
    response_model=JobLogs,
    responses=ERRORS,
    summary="A job's log lines, per attempt (the newest ten, 256 KiB each)",
)
def job_logs(job_id: str, caller: Reader, services: Services) -> JobLogs:
    job = job_detail(services, caller, job_id)
    return JobLogs(
        job_id=job_id,
        attempts=[AttemptLog(attempt=a, log=text) for a, text in attempt_logs(services, job)],
    )


@router.get(
    "/gpus",
    response_model=GpuHealth,
    responses=ERRORS,
    summary="The GPUs' faults (the newest 500) and the GPUs quarantined",
)
def gpu_health(_: Operator, services: Services) -> GpuHealth:
    faults = services.store.faults.gpu_faults()[-MAX_FAULTS:][::-1]
    return GpuHealth(
        faults=[_fault_out(f) for f in faults],
        quarantined=[
            QuarantinedGpu(worker_id=w, gpu_index=g)
            for w, g in sorted(services.store.faults.quarantined_gpus())
        ],
    )


@router.post(
    "/gpus/{worker_id}/{gpu_index}/release",
    response_model=GpuFaultOut,
    responses=ERRORS,
    summary="Release a quarantined GPU: it takes work again, its earlier faults no longer count",
)
def release_gpu(
    worker_id: WorkerId, gpu_index: GpuIndex, caller: Administrator, services: Services
) -> GpuFaultOut:
    released = services.store.faults.release_gpu(
        worker_id, gpu_index, f"operator token {caller.token_id}"
    )
    if released is None:
        raise HTTPException(404, f"GPU {gpu_index} of {worker_id!r} is not quarantined")
    return _fault_out(released)


def _fault_out(fault: GpuFault) -> GpuFaultOut:
    return GpuFaultOut(
        worker_id=fault.worker_id,
        instance_id=fault.instance_id,
        gpu_index=fault.gpu_index,
        kind=fault.kind.value,
        detail=fault.detail,
        at=fault.at,
        job_id=fault.job_id,
    )
