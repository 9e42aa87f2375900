"""/v1/notices (issue 49): the completion notices the control plane sent or is sending, each
with its tries; the dead ones (given up after their last try: the notices' dead letter) are
what an operator looks at, and asks to deliver again once the receiver is mended."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Path, Query
from pydantic import BaseModel, ConfigDict

from kernel.job_spec import JOB_ID_PATTERN
from orchestrator.api.jobs_routes import ERRORS
from orchestrator.api.security import Administrator, Operator, Services

router = APIRouter(prefix="/v1", tags=["operations"])


class NoticeOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)  # made from the store's StoredNotice

    id: int
    notice_id: str  # the key a receiver deduplicates by
    target: str  # webhook | eventbridge
    job_id: str
    kind: str
    state: str  # pending | delivered | dead
    attempts: int
    next_at: datetime
    last_error: str | None
    delivered_at: datetime | None


class NoticeList(BaseModel):
    notices: list[NoticeOut]


@router.get(
    "/notices",
    response_model=NoticeList,
    responses=ERRORS,
    summary="Completion notices, newest first (at most 200): `state=dead` for those given up",
)
def list_notices(
    _: Operator,
    services: Services,
    state: Literal["pending", "delivered", "dead"] | None = None,
    job_id: Annotated[str | None, Query(pattern=JOB_ID_PATTERN)] = None,
) -> NoticeList:
    found = services.store.notices.notices(state, job_id)
    return NoticeList(notices=[NoticeOut.model_validate(n) for n in found])


@router.post(
    "/notices/{row_id}/redeliver",
    status_code=202,
    responses=ERRORS,
    summary="Deliver a dead notice again, from its first try",
)
def redeliver(
    row_id: Annotated[int, Path(ge=1, le=2**31 - 1)], _: Administrator, services: Services
) -> dict[str, int]:
    if not services.store.notices.redeliver(row_id):
        raise HTTPException(404, f"no dead notice {row_id}")
    return {"id": row_id}
