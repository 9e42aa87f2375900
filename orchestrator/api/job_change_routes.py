"""An operator's changes to jobs (issue 49): a queued job's priority or deadline, and a failed
job run again. A failed job stays failed (its state is final, its notice sent, its cost
booked); its retry is a new job, `<id>-r1` (then `-r2`, ...), with the same spec and the
changes asked for, through the same door as a submission: a retry asked twice gives the same
new job."""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, HTTPException, Response
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from kernel.errors import ConcurrentModification, InvalidTransition
from kernel.job_record import AcceptOutcome, JobRecord, Submission
from kernel.job_spec import JOB_ID_PATTERN, JobSpec
from kernel.job_state import JobState
from orchestrator.api.auth import Caller
from orchestrator.api.jobs_routes import ERRORS, JobId, at_the_door, job_summary
from orchestrator.api.models import JobSummary, Problem
from orchestrator.api.ports import ApiServices
from orchestrator.api.security import Administrator, Services, visible_job

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
CHANGE_ERRORS: dict[int | str, dict[str, Any]] = {422: {"model": Problem}, **ERRORS}
_RETRIED = re.compile(r"^(?P<base>.+)-r(?P<n>[0-9]{1,6})$")


class JobChange(BaseModel):
    """What to change; a field left out stays as it is (a `deadline` of null removes it)."""

    model_config = ConfigDict(extra="forbid")
    priority: int | None = Field(default=None, ge=0, le=9, description="0 lowest, 9 most urgent")
    deadline: AwareDatetime | None = Field(default=None, description="Finish by (ISO 8601)")


def changed_spec(services: ApiServices, spec: JobSpec, change: JobChange, job_id: str) -> JobSpec:
    """`spec` under `job_id` with `change`, through the door a new job passes (a deadline in
    the future, an output where the workers may write, a model the registry admits)."""
    data: dict[str, Any] = {**spec.model_dump(mode="json", by_alias=True), "job_id": job_id}
    data.update(change.model_dump(mode="json", include=change.model_fields_set))
    return at_the_door(services, data)


def _words(change: JobChange, job: JobRecord) -> str:
    said = []
    if "priority" in change.model_fields_set:
        said.append(f"priority {job.spec.priority} -> {change.priority}")
    if "deadline" in change.model_fields_set:
        before = job.spec.deadline.isoformat() if job.spec.deadline else "none"
        after = change.deadline.isoformat() if change.deadline else "none"
        said.append(f"deadline {before} -> {after}")
    return "; ".join(said)


def _actor(caller: Caller) -> str:
    return f"api:{caller.name}"[:128]


@router.patch(
    "/{job_id}",
    response_model=JobSummary,
    responses=CHANGE_ERRORS,
    summary="Change a queued job's priority or deadline (an operator's admin token)",
)
def change_job(
    job_id: JobId, change: JobChange, caller: Administrator, services: Services
) -> JobSummary:
    job = visible_job(services, caller, job_id)
    if not change.model_fields_set:
        raise HTTPException(422, "nothing to change: give priority, deadline or both")
    if job.state is not JobState.QUEUED:
        raise HTTPException(409, f"job {job_id!r} is {job.state.value}: only a queued job changes")
    spec = changed_spec(services, job.spec, change, job_id)
    try:
        changed = services.store.changes.replace_queued_spec(
            spec,
            expected_version=job.version,
            actor=_actor(caller),
            reason=f"changed over the API: {_words(change, job)}",
        )
    except (ConcurrentModification, InvalidTransition):
        now = services.store.get(job_id).state.value
        raise HTTPException(409, f"job {job_id!r} moved meanwhile (now {now}): ask again") from None
    return job_summary(services, changed)


def retry_id(job_id: str) -> str:
    """The id of a failed job's retry: `<id>-r1`, and `-r<n+1>` for the retry of `-r<n>`."""
    match = _RETRIED.match(job_id)
    if match is None:
        return f"{job_id}-r1"
    return f"{match['base']}-r{int(match['n']) + 1}"


@router.post(
    "/{job_id}/retry",
    status_code=201,
    response_model=JobSummary,
    responses={200: {"model": JobSummary, "description": "retried before"}, **CHANGE_ERRORS},
    summary="Run a failed job again as a new job <id>-r1 (an operator's admin token)",
)
def retry(
    job_id: JobId,
    response: Response,
    caller: Administrator,
    services: Services,
    change: JobChange | None = None,
) -> JobSummary:
    job = visible_job(services, caller, job_id)
    if job.state is not JobState.FAILED:
        raise HTTPException(409, f"job {job_id!r} is {job.state.value}: only a failed job retries")
    new_id = retry_id(job_id)
    if re.match(JOB_ID_PATTERN, new_id) is None:
        raise HTTPException(409, f"job {job_id!r} has no room for a retry's id: submit it anew")
    deadline = job.spec.deadline
    asked = change or JobChange()
    if deadline and deadline <= services.clock.now() and "deadline" not in asked.model_fields_set:
        raise HTTPException(
            409, f"job {job_id!r}'s deadline has passed: give a new deadline (or null for none)"
        )
    spec = changed_spec(services, job.spec, asked, new_id)
    store = services.store
    (outcome,) = store.intake.accept_batch(
        [Submission(spec, job_id)], _actor(caller), f"a retry of job {job_id}, message"
    )
    if outcome is AcceptOutcome.CONFLICT:
        raise HTTPException(409, f"job {job_id!r} was retried before with other changes: {new_id}")
    if outcome is AcceptOutcome.DUPLICATE:
        response.status_code = 200
    response.headers["Location"] = f"/v1/jobs/{new_id}"
    return job_summary(services, store.get(new_id))
