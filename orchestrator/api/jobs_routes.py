"""/v1/jobs: submit (the SQS intake's validation, idempotent by job_id), list, read, cancel,
and the finished video's link."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import AwareDatetime, BaseModel, Field

from kernel.errors import JobNotFound, JobValidationError
from kernel.job_record import AcceptOutcome, JobRecord, Submission
from kernel.job_spec import JOB_ID_PATTERN, JobSpec, parse_job
from kernel.job_state import ACTIVE_STATES, JobState
from orchestrator.api.auth import Caller
from orchestrator.api.models import JobDetail, JobPage, JobSummary, OutputLink, Problem
from orchestrator.api.ports import ApiServices
from orchestrator.api.security import Canceller, Reader, Services, Submitter, visible_job
from orchestrator.api.views import (
    deadline_risk,
    decode_cursor,
    detail,
    encode_cursor,
    estimated_finish,
    summary,
)
from orchestrator.control.cancel import JobAlreadyEnded, cancel_job
from orchestrator.intake.model_door import DoorRefusal
from orchestrator.store.job_pages import JobFilter

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
JobId = Annotated[str, Path(pattern=JOB_ID_PATTERN, max_length=128)]
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": Problem} for code in (401, 403, 404, 409, 429)
}

SUBMIT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": JobSummary, "description": "already accepted with this spec"},
    413: {"model": Problem},
    422: {"model": Problem},
    **ERRORS,
}
# The body is read as bytes and parsed by the intake's own parser; the document shows its schema.
SUBMIT_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/JobSpec"}}},
    }
}


class CancelRequest(BaseModel):
    reason: str = Field(default="by the user", max_length=500)


class CancelResult(BaseModel):
    job: JobSummary
    stops: str = Field(description="'now' for a job not on a GPU; else 'at its next step'")


async def _body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 past `limit` bytes (declared or streamed)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"the body is {declared} bytes, limit {limit}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise HTTPException(413, f"the body is over the limit of {limit} bytes")
    return bytes(body)


def at_the_door(services: ApiServices, job: bytes | dict[str, Any]) -> JobSpec:
    """A new job's spec as the door admits it (the intake's parser, with a deadline in the
    future, an output where the workers may write, a webhook it may call, a model the
    registry holds), or 422 with each problem: a submission's, a retry's, a change's."""
    settings = services.settings
    try:
        spec = parse_job(
            job,
            now=services.clock.now(),
            outputs=settings.output_prefixes,
            webhooks=settings.webhooks,
        )
    except JobValidationError as error:
        raise HTTPException(422, {"detail": "invalid job", "errors": list(error.errors)}) from None
    if services.admit is None:
        return spec
    admitted = services.admit(spec)
    if isinstance(admitted, DoorRefusal):
        raise HTTPException(422, {"detail": admitted.reason.value, "errors": [admitted.error]})
    return admitted


def job_summary(services: ApiServices, job: JobRecord) -> JobSummary:
    (shown,) = job_summaries(services, [job])
    return shown


def job_summaries(services: ApiServices, jobs: Sequence[JobRecord]) -> list[JobSummary]:
    """Each with its deadline risk: two queries for the page, not two per job."""
    now, ids = services.clock.now(), [job.job_id for job in jobs]
    reservations = services.store.reservations.of(ids)
    progress = services.store.pages.progress_of_jobs(ids)
    return [
        summary(
            job,
            deadline_risk(
                job,
                estimated_finish(job, progress.get(job.job_id), reservations.get(job.job_id), now),
                now,
            ),
        )
        for job in jobs
    ]


@router.post(
    "",
    status_code=201,
    response_model=JobSummary,
    responses=SUBMIT_RESPONSES,
    openapi_extra=SUBMIT_BODY,
    summary="Submit a job (framefleet.job/v1), idempotent by job_id",
)
async def submit(
    request: Request, response: Response, caller: Submitter, services: Services
) -> JobSummary:
    body = await _body(request, services.settings.max_body_bytes)
    spec = at_the_door(services, body)
    if services.inputs_refusal is not None and (spec.image or spec.adapters):
        refused = await services.inputs_refusal(spec)
        if refused is not None:
            raise HTTPException(422, {"detail": refused.reason.value, "errors": [refused.error]})
    if not caller.sees(spec.tags.team):
        teams = ", ".join(caller.team_list() or ())
        raise HTTPException(403, f"this token submits for its teams only ({teams}): set tags.team")
    request_id = f"{caller.token_id}-{uuid.uuid4().hex[:16]}"
    store = services.store
    actor = f"api:{caller.name}"[:128]
    (outcome,) = await run_in_threadpool(
        store.intake.accept_batch, [Submission(spec, request_id)], actor, "API request"
    )
    if outcome is AcceptOutcome.CONFLICT:
        # The same words whoever holds the id: "accepted with another spec" told a team that
        # another team had used it (issue 48). Ids are one namespace, so that it is taken
        # is all any answer can say.
        raise HTTPException(409, f"job_id {spec.job_id!r} is taken: submit under another id")
    if outcome is AcceptOutcome.DUPLICATE:
        response.status_code = 200
    response.headers["Location"] = f"/v1/jobs/{spec.job_id}"
    return await run_in_threadpool(lambda: job_summary(services, store.get(spec.job_id)))


# A tag value to filter by: no control characters (PostgreSQL refuses a NUL with an error).
TagFilter = Annotated[str | None, Query(max_length=128, pattern=r"^[^\x00-\x1f\x7f]*$")]


@router.get("", response_model=JobPage, responses=ERRORS, summary="Jobs, newest first")
def list_jobs(
    caller: Reader,
    services: Services,
    state: Annotated[list[JobState], Query()] = [],  # noqa: B006 (FastAPI copies defaults)
    team: TagFilter = None,
    customer: TagFilter = None,
    project: TagFilter = None,
    created_since: AwareDatetime | None = None,
    created_until: AwareDatetime | None = None,
    cursor: Annotated[str | None, Query(max_length=400)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> JobPage:
    after = decode_cursor(cursor) if cursor else None
    if cursor and after is None:
        raise HTTPException(400, "not a cursor this API gave out")
    tags = tuple(
        (k, v)
        for k, v in (("team", team), ("customer", customer), ("project", project))
        if v is not None
    )
    where = JobFilter(tuple(state), tags, created_since, created_until, caller.team_list())
    jobs = services.store.pages.job_page(where, after, limit + 1)
    shown = jobs[:limit]
    more = encode_cursor(shown[-1]) if len(jobs) > limit else None
    return JobPage(jobs=job_summaries(services, shown), next_cursor=more)


@router.get("/{job_id}", response_model=JobDetail, responses=ERRORS, summary="One job")
def read_job(job_id: JobId, caller: Reader, services: Services) -> JobDetail:
    return job_detail(services, caller, job_id)


def job_detail(services: ApiServices, caller: Caller, job_id: str) -> JobDetail:
    store = services.store
    job = visible_job(services, caller, job_id)
    return detail(
        job,
        store.history(job_id),
        store.pages.attempts_facts(job_id),
        store.pages.progress_of(job_id),
        store.reservations.of([job_id]).get(job_id),
        services.job_cost(job_id),
        services.clock.now(),
    )


@router.post(
    "/{job_id}/cancel",
    response_model=CancelResult,
    responses=ERRORS,
    summary="Cancel: a queued job at once, a running one at its next step (its GPU is freed)",
)
def cancel(
    job_id: JobId, caller: Canceller, services: Services, body: CancelRequest | None = None
) -> CancelResult:
    store = services.store
    reason = (body or CancelRequest()).reason
    try:
        before = visible_job(services, caller, job_id)
        after = cancel_job(store, job_id, reason, actor=f"api:{caller.name}"[:128])
    except JobNotFound:
        raise HTTPException(404, f"no job {job_id!r}") from None
    except JobAlreadyEnded as ended:
        raise HTTPException(409, f"job {job_id!r} already ended: {ended.job.state.value}") from None
    stops = "at its next step" if before.state in ACTIVE_STATES else "now"
    return CancelResult(job=job_summary(services, after), stops=stops)


@router.get(
    "/{job_id}/output",
    response_model=OutputLink,
    responses=ERRORS,
    summary="A presigned S3 link to the finished MP4",
)
def output(job_id: JobId, caller: Reader, services: Services) -> OutputLink:
    job = visible_job(services, caller, job_id)
    if job.state is not JobState.SUCCEEDED:
        raise HTTPException(409, f"job {job_id!r} has no video: it is {job.state.value}")
    spec, seconds = job.spec, services.settings.output_link_seconds
    url = services.presign(spec.output_bucket, f"{spec.output_prefix}{spec.job_id}.mp4", seconds)
    return OutputLink(url=url, expires_at=services.clock.now() + timedelta(seconds=seconds))
