"""The dead-letter queue for operators: read without consuming it (the console, the API, the
demo), and one message redriven to the jobs queue or deleted (the API)."""

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
    received = _receive_all(sqs, queue_url, limit)
    _release(sqs, queue_url, [receipt for _, receipt in received])
    return [letter for letter, _ in received]


def redrive_dead_letter(sqs: SQSClient, queue_url: str, jobs_url: str, message_id: str) -> bool:
    """Send one dead letter's body to the jobs queue again, then delete it (False: no such
    message). A crash between the two leaves it in both queues: the intake takes a job id
    once, so the second copy is a duplicate, not a second job."""
    taken = _take(sqs, queue_url, message_id)
    if taken is None:
        return False
    letter, receipt = taken
    with translated("SendMessage"):
        sqs.send_message(QueueUrl=jobs_url, MessageBody=letter.body)
    with translated("DeleteMessage"):
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=receipt)
    return True


def discard_dead_letter(sqs: SQSClient, queue_url: str, message_id: str) -> bool:
    """Delete one dead letter (False: no such message)."""
    taken = _take(sqs, queue_url, message_id)
    if taken is None:
        return False
    with translated("DeleteMessage"):
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=taken[1])
    return True


def _take(sqs: SQSClient, queue_url: str, message_id: str) -> tuple[DeadLetter, str] | None:
    """The message, held (hidden) for its move; every other one visible again at once."""
    received = _receive_all(sqs, queue_url, 1000)
    chosen = next((item for item in received if item[0].message_id == message_id), None)
    others = [receipt for letter, receipt in received if letter.message_id != message_id]
    _release(sqs, queue_url, others)
    return chosen


def _receive_all(sqs: SQSClient, queue_url: str, limit: int) -> list[tuple[DeadLetter, str]]:
    found: dict[str, tuple[DeadLetter, str]] = {}
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
            letter = DeadLetter(
                message_id=message["MessageId"],
                body=message.get("Body", ""),
                reason=attributes.get("reason", "redriven"),
                errors=attributes.get("errors", ""),
                original_message_id=attributes.get("original-message-id", message["MessageId"]),
            )
            found[message["MessageId"]] = (letter, message["ReceiptHandle"])
    return list(found.values())


def _release(sqs: SQSClient, queue_url: str, receipts: list[str]) -> None:
    for start in range(0, len(receipts), 10):
        with translated("ChangeMessageVisibilityBatch"):
            sqs.change_message_visibility_batch(
                QueueUrl=queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": handle, "VisibilityTimeout": 0}
                    for i, handle in enumerate(receipts[start : start + 10])
                ],
            )
