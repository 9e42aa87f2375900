"""A job as the API shows it: the summary's fields, and the whole answer in `raw`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ENDED = frozenset({"succeeded", "failed", "cancelled"})


@dataclass(frozen=True)
class Job:
    job_id: str
    state: str  # queued, assigned, running, checkpointing, preempted, succeeded, failed, ...
    priority: int
    model: str
    deadline: str | None  # ISO 8601
    attempt: int
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def ended(self) -> bool:
        return self.state in ENDED

    @property
    def succeeded(self) -> bool:
        return self.state == "succeeded"

    @classmethod
    def from_answer(cls, answer: dict[str, Any]) -> Job:
        return cls(
            job_id=str(answer["job_id"]),
            state=str(answer["state"]),
            priority=int(answer.get("priority", 0)),
            model=str(answer.get("model", "")),
            deadline=answer.get("deadline"),
            attempt=int(answer.get("attempt", 0)),
            raw=answer,
        )
