"""What a notice says (`framefleet.notice/v1`, README "Completion notices"), made from one line
of a job's history (pure). Its `notice_id` is that line's id: the same for every target and
every delivery of it, the key a receiver deduplicates by (delivery is at least once)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from kernel.job_record import JobEvent
from kernel.job_spec import JobSpec
from kernel.job_state import JobState
from kernel.notify_spec import NoticeKind

NOTICE_SCHEMA = "framefleet.notice/v1"
REASON_CHARS = 2000
_DONE = JobState.SUCCEEDED
_ENDS = {
    JobState.SUCCEEDED: "job.succeeded",
    JobState.FAILED: "job.failed",
    JobState.CANCELLED: "job.cancelled",
}


@dataclass(frozen=True)
class Notice:
    notice_id: str
    kind: str  # job.succeeded, job.failed, job.cancelled, job.interrupted, job.resumed
    job_id: str
    body: str  # the JSON every target is sent
    webhook: str | None  # the job's own, when it asked to hear of this kind


def kind_of(event: JobEvent) -> tuple[NoticeKind, str] | None:
    """Which notice a history line makes, if any."""
    if event.to_state in _ENDS and event.from_state is not event.to_state:
        return NoticeKind.ENDED, _ENDS[event.to_state]
    if event.to_state is JobState.PREEMPTED:
        return NoticeKind.INTERRUPTED, "job.interrupted"
    # A later attempt runs: it resumed (from its checkpoint).
    later = event.attempt > 1 and event.from_state is JobState.ASSIGNED
    if event.to_state is JobState.RUNNING and later:
        return NoticeKind.RESUMED, "job.resumed"
    return None


def notice_of(event_id: int, event: JobEvent, spec: JobSpec) -> Notice | None:
    found = kind_of(event)
    if found is None:
        return None
    asked, kind = found
    body = {
        "schema": NOTICE_SCHEMA,
        "notice_id": str(event_id),
        "kind": kind,
        "job_id": event.job_id,
        "state": event.to_state.value,
        "at": event.at.isoformat(),
        "attempt": event.attempt,
        "reason": event.reason[:REASON_CHARS],
        "output": f"{spec.output}{spec.job_id}.mp4"
        if event.to_state is JobState.SUCCEEDED
        else None,
        "tags": spec.tags.model_dump(exclude_none=True),
    }
    webhook = spec.notify.webhook if spec.notify and asked in spec.notify.events else None
    return Notice(str(event_id), kind, event.job_id, json.dumps(body, sort_keys=True), webhook)
