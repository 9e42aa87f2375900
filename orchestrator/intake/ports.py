"""What the intake needs from the outside world, declared by the intake (narrow ports)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kernel.job_record import AcceptOutcome, Rejection, Submission


@dataclass(frozen=True)
class ReceivedMessage:
    message_id: str
    receipt_handle: str
    body: str
    receive_count: int
    sender: str = ""  # SQS's SenderId: the IAM identity that sent it (AIDA..., AROA...:session)


class MessageQueue(Protocol):
    async def receive(
        self, max_messages: int, wait_seconds: int, visibility_timeout: int
    ) -> list[ReceivedMessage]: ...

    async def delete(self, receipt_handles: Sequence[str]) -> None: ...

    async def extend_visibility(self, receipt_handles: Sequence[str], seconds: int) -> None: ...


class DeadLetterQueue(Protocol):
    async def send(self, body: str, attributes: Mapping[str, str]) -> None: ...


class JobSink(Protocol):
    """The part of the job store the intake writes to (synchronous; run in a thread)."""

    def accept_batch(self, submissions: Sequence[Submission]) -> list[AcceptOutcome]: ...

    def record_rejection(self, rejection: Rejection) -> bool: ...

    def mark_dead_lettered(self, message_id: str) -> None: ...
