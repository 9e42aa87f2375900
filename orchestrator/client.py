"""The producer library: validate a job locally, then put it on the jobs queue.

    from orchestrator.client import submit_job
    message_id = submit_job({...}, queue_url=URL)

Validation happens before sending, so a producer learns about a bad job at once instead of
finding it in the dead-letter queue later. Sending the same job twice is safe (job_id is the
idempotency key).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import boto3

from kernel.aws_errors import translated
from kernel.errors import JobValidationError
from kernel.job_spec import DEFAULT_MAX_MESSAGE_BYTES, JobSpec, output_refusal, parse_job

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


def submit_job(
    job: JobSpec | Mapping[str, Any],
    *,
    queue_url: str,
    sqs: SQSClient | None = None,
    region: str = "us-east-1",
    endpoint_url: str | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    output_prefixes: tuple[str, ...] = (),
) -> str:
    """Validate and send one job; returns the SQS message id. `output_prefixes`: where the
    deployment's workers may write (the control plane refuses an output elsewhere)."""
    if isinstance(job, JobSpec):
        spec = job
        problem = output_refusal(spec.output, output_prefixes)
        if problem is not None:
            raise JobValidationError((f"output: {problem}",))
    else:
        spec = parse_job(dict(job), now=datetime.now(UTC), outputs=output_prefixes)
    body = spec.canonical_json()
    if len(body.encode()) > max_message_bytes:
        raise JobValidationError(
            (f"message is {len(body.encode())} bytes, limit {max_message_bytes}",)
        )
    client = sqs or boto3.client("sqs", region_name=region, endpoint_url=endpoint_url)
    with translated("SendMessage"):
        response = client.send_message(QueueUrl=queue_url, MessageBody=body)
    return response["MessageId"]
