"""The end of the demo: what happened, what it cost, and whether anything went wrong.

- every video from S3 into ./demo-output/ as MP4, and each resumed job's video checked byte for
  byte against an uninterrupted render of the same spec (the worker agent, in process);
- a timeline of interruptions, checkpoints and reassignments (the fleet runner's timeline and
  the jobs' histories);
- the cost: every instance billed per second of the replayed market's time, at the trace's spot
  price of the moment or on-demand, against the same instance time on on-demand only;
- a verdict: any job lost, finished twice, failed or late makes the exit status 1.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from autoscaler.market.trace import ON_DEMAND_PRICES, Trace
from kernel.clock import ReplayClock
from kernel.job_record import JobEvent, JobRecord
from kernel.job_spec import JobSpec
from kernel.job_state import JobState
from kernel.outside_text import printable

SHOWN_STATES = {
    JobState.ASSIGNED, JobState.PREEMPTED, JobState.SUCCEEDED, JobState.FAILED,
    JobState.CANCELLED,
}  # fmt: skip
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

    @property
    def total(self) -> int:
        return self.noticed + self.silent


def interruptions(timeline: Sequence[dict[str, Any]]) -> Interruptions:
    reclaims = [e for e in timeline if e["kind"] == "spot_reclaimed"]
    noticed = sum(1 for e in reclaims if e.get("notice"))
    return Interruptions(noticed, len(reclaims) - noticed)


@dataclass
class InstanceLife:
    instance_id: str
    zone: str
    market: str
    instance_type: str
    started: datetime
    ended: datetime | None = None


def instance_lives(timeline: Sequence[dict[str, Any]]) -> list[InstanceLife]:
    lives: dict[str, InstanceLife] = {}
    for entry in timeline:
        instance_id, at = entry.get("instance_id"), datetime.fromisoformat(entry["at"])
        if not isinstance(instance_id, str):
            continue
        if entry["kind"] == "worker_started":
            lives[instance_id] = InstanceLife(
                instance_id, entry["zone"], entry["market"], entry["instance_type"], at
            )
        elif instance_id in lives and entry["kind"] in (
            "spot_reclaimed", "worker_stopped", "worker_killed"
        ) and lives[instance_id].ended is None:  # fmt: skip
            lives[instance_id].ended = at
    return list(lives.values())


@dataclass(frozen=True)
class Cost:
    dollars: float
    on_demand_dollars: float  # the same instance time, all on-demand
    instance_hours: float  # of the replayed market's time


def bill(lives: Iterable[InstanceLife], trace: Trace, replay: ReplayClock, end: datetime) -> Cost:
    """Per second of replayed time: the spot price of each tick the instance lived through,
    or the on-demand price."""
    dollars = on_demand = seconds = 0.0
    for life in lives:
        on_demand_rate = ON_DEMAND_PRICES.get(life.instance_type, 0.0)
        start = replay.trace_time(life.started)
        stop = replay.trace_time(life.ended or end)
        zone = trace.zones.get(life.zone)
        at = start
        while at < stop:
            tick = int((at - trace.start) / trace.gap)
            tick_end = min(stop, trace.start + trace.gap * (tick + 1))
            span = (tick_end - at).total_seconds()
            spot = life.market == "spot" and zone is not None and 0 <= tick < trace.ticks
            rate = zone.prices[tick] if spot and zone is not None else on_demand_rate
            dollars += rate * span / 3600
            on_demand += on_demand_rate * span / 3600
            seconds += span
            at = tick_end
    return Cost(round(dollars, 2), round(on_demand, 2), seconds / 3600)


@dataclass
class Verdict:
    succeeded: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # sent, never finished (or never stored)
    duplicated: list[str] = field(default_factory=list)  # finished more than once
    late: list[str] = field(default_factory=list)
    with_deadline: int = 0

    @property
    def ok(self) -> bool:
        return not (self.failed or self.lost or self.duplicated or self.late)


def judge(
    expected: Sequence[str], records: dict[str, JobRecord], histories: dict[str, list[JobEvent]]
) -> Verdict:
    verdict = Verdict()
    for job_id in expected:
        record = records.get(job_id)
        if record is None or not record.state.terminal:
            verdict.lost.append(job_id)
            continue
        history = histories.get(job_id, [])
        finished = [e for e in history if e.to_state.terminal]
        if len(finished) > 1:
            verdict.duplicated.append(job_id)
        if record.state is JobState.SUCCEEDED:
            verdict.succeeded.append(job_id)
        else:
            verdict.failed.append(job_id)
        if record.deadline is not None:
            verdict.with_deadline += 1
            done_at = finished[0].at if finished else None
            if done_at is None or done_at > record.deadline:
                verdict.late.append(job_id)
    return verdict


def resumed(history: Sequence[JobEvent]) -> bool:
    """A job that lost a worker (interruption, drain or silent death) and ran again."""
    return any(e.to_state is JobState.ASSIGNED and e.attempt > 1 for e in history)


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
