"""/v1/dead-letters (issue 49): the messages the intake refused, read by an operator's token,
and one of them sent to the jobs queue again (after the cause is fixed: a model registered, a
quota raised) or deleted, by an admin token of every team."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, TypeVar

from fastapi import APIRouter, HTTPException, Path, Response
from pydantic import BaseModel

from orchestrator.api.jobs_routes import ERRORS
from orchestrator.api.security import Administrator, Operator, Services

router = APIRouter(prefix="/v1", tags=["dead letters"])
T = TypeVar("T")
MessageId = Annotated[str, Path(pattern=r"^[A-Za-z0-9-]{1,100}$")]  # SQS's message ids


class DeadLetterOut(BaseModel):
    message_id: str
    reason: str
    errors: str
    body: str  # cut at 2,000 characters


class DeadLetterList(BaseModel):
    letters: list[DeadLetterOut]


class Redriven(BaseModel):
    message_id: str
    redriven: bool


def _configured(found: T | None) -> T:
    if found is None:
        raise HTTPException(404, "no dead-letter queue is configured here")
    return found


@router.get(
    "/dead-letters",
    response_model=DeadLetterList,
    responses=ERRORS,
    summary="The messages the intake refused, with why (at most 200)",
)
def list_dead_letters(_: Operator, services: Services) -> DeadLetterList:
    letters = _configured(services.dead_letters)()
    return DeadLetterList(
        letters=[
            DeadLetterOut(
                message_id=letter.message_id,
                reason=letter.reason,
                errors=letter.errors,
                body=letter.body,
            )
            for letter in letters
        ]
    )


@router.post(
    "/dead-letters/{message_id}/redrive",
    response_model=Redriven,
    responses=ERRORS,
    summary="Send a dead letter to the jobs queue again (a job id is still taken once)",
)
def redrive(message_id: MessageId, _: Administrator, services: Services) -> Redriven:
    _moved(_configured(services.redrive_dead_letter), message_id)
    return Redriven(message_id=message_id, redriven=True)


@router.delete(
    "/dead-letters/{message_id}",
    status_code=204,
    responses=ERRORS,
    summary="Delete a dead letter",
)
def discard(message_id: MessageId, _: Administrator, services: Services) -> Response:
    _moved(_configured(services.discard_dead_letter), message_id)
    return Response(status_code=204)


def _moved(move: Callable[[str], bool], message_id: str) -> None:
    if not move(message_id):
        raise HTTPException(404, f"no dead letter {message_id!r} (moved or deleted already?)")
