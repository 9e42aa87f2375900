"""Read the dead-letter queue without consuming it (operators, the demo, tests)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kernel.aws_errors import translated
from kernel.dead_letter import ATTR_PREFIX

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


@dataclass(frozen=True)
class DeadLetter:
    message_id: str
    body: str
    reason: str
    errors: str
    original_message_id: str


def peek_dead_letters(sqs: SQSClient, queue_url: str, limit: int = 1000) -> list[DeadLetter]:
    """Receive everything (hidden for a moment so each message is seen once), then make it
    visible again at once."""
    found: dict[str, DeadLetter] = {}
    receipts: list[str] = []
    while len(found) < limit:
        with translated("ReceiveMessage"):
            messages = sqs.receive_message(
                QueueUrl=queue_url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=60,
                WaitTimeSeconds=0,
                MessageAttributeNames=["All"],
            ).get("Messages", [])
        if not messages:
            break
        for message in messages:
            attributes = {
                name.removeprefix(ATTR_PREFIX): value.get("StringValue", "")
                for name, value in message.get("MessageAttributes", {}).items()
            }
            found[message["MessageId"]] = DeadLetter(
                message_id=message["MessageId"],
                body=message.get("Body", ""),
                reason=attributes.get("reason", "redriven"),
                errors=attributes.get("errors", ""),
                original_message_id=attributes.get("original-message-id", message["MessageId"]),
            )
            receipts.append(message["ReceiptHandle"])
    for start in range(0, len(receipts), 10):
        with translated("ChangeMessageVisibilityBatch"):
            sqs.change_message_visibility_batch(
                QueueUrl=queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": handle, "VisibilityTimeout": 0}
                    for i, handle in enumerate(receipts[start : start + 10])
                ],
            )
    return list(found.values())
