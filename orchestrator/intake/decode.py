"""Turn one SQS message into a validated submission or a reasoned rejection (pure)."""

from __future__ import annotations

import json
from datetime import datetime
from enum import StrEnum

from orchestrator.domain.errors import JobValidationError
from orchestrator.domain.job_record import Rejection, Submission
from orchestrator.domain.job_spec import parse_job
from orchestrator.intake.ports import ReceivedMessage


class RejectionReason(StrEnum):
    OVERSIZED = "oversized"
    INVALID_JSON = "invalid_json"
    INVALID_JOB = "invalid_job"
    CONFLICTING_DUPLICATE = "conflicting_duplicate"


def decode_message(
    message: ReceivedMessage, *, max_bytes: int, now: datetime
) -> Submission | Rejection:
    size = len(message.body.encode())
    if size > max_bytes:
        return _reject(
            message, RejectionReason.OVERSIZED, f"message is {size} bytes, limit {max_bytes}"
        )
    try:
        data = json.loads(message.body)
    except json.JSONDecodeError as error:
        return _reject(message, RejectionReason.INVALID_JSON, f"not JSON: {error}")
    if not isinstance(data, dict):
        return _reject(message, RejectionReason.INVALID_JOB, "message must be a JSON object")
    try:
        spec = parse_job(data, now=now)
    except JobValidationError as error:
        return Rejection(
            message.message_id, RejectionReason.INVALID_JOB, error.errors, message.body
        )
    return Submission(spec=spec, message_id=message.message_id)


def _reject(message: ReceivedMessage, reason: RejectionReason, error: str) -> Rejection:
    return Rejection(message.message_id, reason, (error,), message.body)


def conflicting_duplicate(submission: Submission, body: str) -> Rejection:
    return Rejection(
        submission.message_id,
        RejectionReason.CONFLICTING_DUPLICATE,
        (f"job_id {submission.spec.job_id!r} was already accepted with a different spec",),
        body,
    )
