"""SQS adapters for the intake's MessageQueue and DeadLetterQueue ports."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from kernel.aws_errors import translated
from orchestrator.intake.ports import ReceivedMessage

if TYPE_CHECKING:
    from types_aiobotocore_sqs import SQSClient

log = logging.getLogger(__name__)
SQS_BATCH_LIMIT = 10


def _chunks(items: Sequence[str], size: int) -> list[Sequence[str]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


class SqsQueue:
    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._client = client
        self.queue_url = queue_url

    async def receive(
        self, max_messages: int, wait_seconds: int, visibility_timeout: int
    ) -> list[ReceivedMessage]:
        with translated("ReceiveMessage"):
            response = await self._client.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=min(max_messages, SQS_BATCH_LIMIT),
                WaitTimeSeconds=wait_seconds,
                VisibilityTimeout=visibility_timeout,
                MessageSystemAttributeNames=["ApproximateReceiveCount", "SenderId"],
            )
        return [
            ReceivedMessage(
                message_id=message["MessageId"],
                receipt_handle=message["ReceiptHandle"],
                body=message.get("Body", ""),
                receive_count=int(message.get("Attributes", {}).get("ApproximateReceiveCount", 1)),
                sender=str(message.get("Attributes", {}).get("SenderId", "")),
            )
            for message in response.get("Messages", [])
        ]

    async def delete(self, receipt_handles: Sequence[str]) -> None:
        for chunk in _chunks(receipt_handles, SQS_BATCH_LIMIT):
            with translated("DeleteMessageBatch"):
                response = await self._client.delete_message_batch(
                    QueueUrl=self.queue_url,
                    Entries=[{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(chunk)],
                )
            for failure in response.get("Failed", []):
                # Harmless: the message comes back and is recognised as a duplicate.
                log.warning("delete failed (will be redelivered): %s", failure.get("Message"))

    async def extend_visibility(self, receipt_handles: Sequence[str], seconds: int) -> None:
        for chunk in _chunks(receipt_handles, SQS_BATCH_LIMIT):
            with translated("ChangeMessageVisibilityBatch"):
                await self._client.change_message_visibility_batch(
                    QueueUrl=self.queue_url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": seconds}
                        for i, h in enumerate(chunk)
                    ],
                )


class SqsDeadLetterQueue:
    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._client = client
        self.queue_url = queue_url

    async def send(self, body: str, attributes: Mapping[str, str]) -> None:
        with translated("SendMessage"):
            await self._client.send_message(
                QueueUrl=self.queue_url,
                MessageBody=body,
                MessageAttributes={
                    name: {"DataType": "String", "StringValue": value}
                    for name, value in attributes.items()
                },
            )


async def queue_depth(client: SQSClient, queue_url: str) -> int:
    """SQS's approximate count of visible messages (a metric and a readiness probe)."""
    with translated("GetQueueAttributes"):
        answer = await client.get_queue_attributes(
            QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"]
        )
    return int(answer.get("Attributes", {}).get("ApproximateNumberOfMessages", "0"))
