"""The end of the demo: what happened, what it cost, and whether anything went wrong.

- every video from S3 into ./demo-output/ as MP4, and each resumed job's video checked byte for
  byte against an uninterrupted render of the same spec (the worker agent, in process);
- a timeline of interruptions, checkpoints and reassignments (the fleet runner's timeline and
  the jobs' histories);
- the cost: the product's own ledger and finance report (`demo_finance`);
- a verdict: any job lost, finished twice, failed or late makes the exit status 1.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from kernel.job_record import JobEvent, JobRecord
from kernel.job_spec import JobSpec
from kernel.job_state import JobState
from kernel.outside_text import printable
from orchestrator.store.cost_facts import AttemptSpan

SHOWN_STATES = {
    JobState.ASSIGNED,
    JobState.PREEMPTED,
    JobState.SUCCEEDED,
    JobState.FAILED,
    JobState.CANCELLED,
}
FLEET_EVENTS = {
    "worker_started": "instance up, worker started",
    "spot_notice": "spot interruption notice (IMDS + EventBridge)",
    "spot_reclaimed": "reclaimed by the spot market",
    "worker_stopped": "worker stopped",
}


def read_timeline(path: Path) -> list[dict[str, Any]]:
    """The fleet runner's JSON lines; a torn last line (it may be writing) is skipped."""
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("at"), str):
            entries.append(entry)
    return entries


@dataclass(frozen=True)
class Interruptions:
    noticed: int
    silent: int
    noticed_busy: int = 0  # with notice, on an instance that ran a job
    silent_busy: int = 0

    @property
    def total(self) -> int:
        return self.noticed + self.silent


def interruptions(timeline: Sequence[dict[str, Any]]) -> Interruptions:
    reclaims = [e for e in timeline if e["kind"] == "spot_reclaimed"]
    noticed = [e for e in reclaims if e.get("notice")]
    silent = [e for e in reclaims if not e.get("notice")]
    return Interruptions(
        len(noticed),
        len(silent),
        sum(1 for e in noticed if e.get("busy")),
        sum(1 for e in silent if e.get("busy")),
    )


@dataclass
class Verdict:
    succeeded: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)  # stored, not done at the timeout
    lost: list[str] = field(default_factory=list)  # sent, and the store does not have it
    duplicated: list[str] = field(default_factory=list)  # finished more than once
    late: list[str] = field(default_factory=list)  # done after its deadline, or not done by it
    with_deadline: int = 0

    @property
    def ok(self) -> bool:
        return not (self.failed or self.unfinished or self.lost or self.duplicated or self.late)


def judge(
    expected: Sequence[str],
    records: dict[str, JobRecord],
    histories: dict[str, list[JobEvent]],
    now: datetime,
) -> Verdict:
    """Each expected job's fate at `now` (the end of the run)."""
    verdict = Verdict()
    for job_id in expected:
        record = records.get(job_id)
        if record is None:
            verdict.lost.append(job_id)
            continue
        finished = [e for e in histories.get(job_id, []) if e.to_state.terminal]
        if record.deadline is not None:
            verdict.with_deadline += 1
            done_at = finished[0].at if finished else now
            if done_at > record.deadline:
                verdict.late.append(job_id)
        if not record.state.terminal:
            verdict.unfinished.append(job_id)
            continue
        if len(finished) > 1:
            verdict.duplicated.append(job_id)
        if record.state is JobState.SUCCEEDED:
            verdict.succeeded.append(job_id)
        else:
            verdict.failed.append(job_id)
    return verdict


def resumed_from_checkpoint(attempts: Sequence[AttemptSpan]) -> bool:
    """An attempt that checkpointed, followed by one on another instance: the job went on
    from its checkpoint elsewhere."""
    ordered = sorted(attempts, key=lambda span: span.attempt)
    return any(
        before.checkpointed_at is not None and after.instance_id != before.instance_id
        for before, after in itertools.pairwise(ordered)
    )


@dataclass(frozen=True)
class TimelineRow:
    at: datetime
    what: str
    subject: str
    detail: str


def timeline_rows(
    fleet: Sequence[dict[str, Any]], histories: dict[str, list[JobEvent]]
) -> list[TimelineRow]:
    rows = []
    for entry in fleet:
        if entry["kind"] in FLEET_EVENTS:
            where = f"{entry.get('market', '')} {entry.get('zone', '')}".strip()
            if entry["kind"] == "spot_reclaimed":
                where += ", with notice" if entry.get("notice") else ", NO notice: process killed"
            elif entry["kind"] == "worker_stopped":
                where += f" ({entry.get('why', '')})"  # terminated in EC2, or the demo ends
            at = datetime.fromisoformat(entry["at"])
            subject = str(entry.get("instance_id", ""))
            rows.append(TimelineRow(at, FLEET_EVENTS[entry["kind"]], subject, where))
    for job_id, history in histories.items():
        for event in history:
            if event.to_state not in SHOWN_STATES:
                continue
            what = f"job {event.to_state.value}"
            if event.to_state is JobState.ASSIGNED and event.attempt > 1:
                what = f"job reassigned (attempt {event.attempt})"
            rows.append(TimelineRow(event.at, what, job_id, printable(event.reason, 110)))
    return sorted(rows, key=lambda row: row.at)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def reference_spec(spec: JobSpec) -> JobSpec:
    """The same job under another id and output prefix: its video must be the same bytes."""
    return spec.model_copy(
        update={"job_id": f"{spec.job_id}-reference", "output": f"{spec.output}reference/"}
    )


def seconds_since(start: datetime, at: datetime) -> str:
    return f"+{(at - start) / timedelta(seconds=1):6.1f}s"
