"""Jobs sent through the jobs queue (SQS) instead of the API: for many at once (batches of
ten, SQS's limit), or for a producer that has no token but may send to the queue. The control
plane takes them as it takes the API's, idempotent by `job_id`; follow them with `Client`.

Needs boto3: `pip install "framefleet-client[sqs]"`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from framefleet_client.errors import ClientError, SqsRefused

BATCH = 10  # SendMessageBatch's most entries


class QueueSender:
    def __init__(self, queue_url: str, sqs: Any = None, **client_args: Any) -> None:
        """`sqs`: a boto3 SQS client (None: one made with `client_args`, such as
        region_name and endpoint_url)."""
        if sqs is None:
            try:
                import boto3
            except ImportError:
                raise ClientError(
                    'sending through SQS needs boto3: pip install "framefleet-client[sqs]"'
                ) from None
            sqs = boto3.client("sqs", **client_args)
        self._sqs = sqs
        self._queue_url = queue_url

    def submit(self, job: Mapping[str, Any]) -> str:
        """Send one job; its SQS message id."""
        answer = self._sqs.send_message(QueueUrl=self._queue_url, MessageBody=_body(job))
        return str(answer["MessageId"])

    def submit_batch(self, jobs: Iterable[Mapping[str, Any]]) -> dict[str, str]:
        """Send jobs ten to a request; each job id's message id. SqsRefused names the jobs
        SQS refused (the others were sent: sending them all again is safe)."""
        sent: dict[str, str] = {}
        refused: dict[str, str] = {}
        batch: list[Mapping[str, Any]] = []
        for job in [*jobs, None]:
            if job is not None:
                batch.append(job)
            if batch and (job is None or len(batch) == BATCH):
                entries = [{"Id": str(i), "MessageBody": _body(j)} for i, j in enumerate(batch)]
                answer = self._sqs.send_message_batch(QueueUrl=self._queue_url, Entries=entries)
                for ok in answer.get("Successful", []):
                    sent[str(batch[int(ok["Id"])]["job_id"])] = str(ok["MessageId"])
                for failed in answer.get("Failed", []):
                    job_id = str(batch[int(failed["Id"])]["job_id"])
                    refused[job_id] = str(failed.get("Message") or failed.get("Code"))
                batch = []
        if refused:
            raise SqsRefused(refused)
        return sent


def _body(job: Mapping[str, Any]) -> str:
    if not isinstance(job.get("job_id"), str):
        raise ClientError("a job needs a job_id (a string): it is the idempotency key")
    return json.dumps(dict(job), separators=(",", ":"), sort_keys=True)
