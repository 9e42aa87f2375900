"""Turn one SQS message into a validated submission or a reasoned rejection (pure, total).

Every input gives a Submission or a Rejection: the size is checked before anything is parsed,
and the job parser is total (see `parse_job`), so no message body can raise out of here.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from kernel.errors import JobValidationError
from kernel.job_record import Rejection, Submission
from kernel.job_spec import parse_job
from kernel.notify_spec import WebhookRule
from orchestrator.intake.ports import ReceivedMessage


class RejectionReason(StrEnum):
    OVERSIZED = "oversized"
    INVALID_JSON = "invalid_json"
    INVALID_JOB = "invalid_job"
    CONFLICTING_DUPLICATE = "conflicting_duplicate"
    # Refused at the model door (`model_door.DoorReason`): no such model, or no GPU that big.
    UNKNOWN_MODEL = "unknown_model"
    IMPOSSIBLE_NEED = "impossible_need"
    # An input the model does not take, or one that is missing, unreadable, too large or not
    # of a type it reads (an image, an adapter).
    BAD_INPUT = "bad_input"
    # The job claims a team its sender (SQS's SenderId) does not have (`sender_teams`).
    TEAM_NOT_ALLOWED = "team_not_allowed"
    # The message parsed but handling it failed for a reason of its own (the database refused
    # a value, or an error nobody foresaw): dead-lettered so the rest of the queue flows.
    HANDLER_ERROR = "handler_error"


_NOT_JSON = "(message): Invalid JSON"
_NOT_OBJECT = "(message): Input should be an object"


def decode_message(
    message: ReceivedMessage,
    *,
    max_bytes: int,
    now: datetime,
    outputs: tuple[str, ...] = (),
    webhooks: WebhookRule | None = None,
) -> Submission | Rejection:
    """`outputs`: the prefixes a job's output must lie under (where the workers may write);
    `webhooks`: where its `notify` may point."""
    size = len(message.body.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        return _reject(
            message, RejectionReason.OVERSIZED, f"message is {size} bytes, limit {max_bytes}"
        )
    try:
        body = message.body.encode("utf-8", "surrogatepass")
        spec = parse_job(body, now=now, outputs=outputs, webhooks=webhooks)
    except JobValidationError as error:
        if len(error.errors) == 1 and error.errors[0].startswith(_NOT_JSON):
            detail = error.errors[0].removeprefix("(message): ")
            return _reject(message, RejectionReason.INVALID_JSON, f"not JSON: {detail}")
        if len(error.errors) == 1 and error.errors[0].startswith(_NOT_OBJECT):
            return _reject(message, RejectionReason.INVALID_JOB, "message must be a JSON object")
        return Rejection(
            message.message_id, RejectionReason.INVALID_JOB, error.errors, message.body
        )
    return Submission(spec=spec, message_id=message.message_id)


def _reject(message: ReceivedMessage, reason: RejectionReason, error: str) -> Rejection:
    return Rejection(message.message_id, reason, (error,), message.body)


def handler_error(message_id: str, body: str, error: BaseException) -> Rejection:
    return Rejection(
        message_id,
        RejectionReason.HANDLER_ERROR,
        (f"{type(error).__name__}: {str(error)[:500]}",),
        body,
    )


def conflicting_duplicate(submission: Submission, body: str) -> Rejection:
    return Rejection(
        submission.message_id,
        RejectionReason.CONFLICTING_DUPLICATE,
        (f"job_id {submission.spec.job_id!r} was already accepted with a different spec",),
        body,
    )
