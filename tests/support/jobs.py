"""Job factories and moves for tests: a job's JSON, an assignment command, a decision applied."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from framefleet.demo_producer import demo_jobs
from kernel.errors import FrameFleetError
from kernel.job_record import (
    JobRecord,
    Submission,
)
from kernel.job_spec import JobSpec, parse_job
from kernel.job_state import JobState
from kernel.worker_protocol import Channel, Command, CommandKind, topic
from orchestrator.control.apply import as_move
from orchestrator.control.job_events import Decision
from orchestrator.store.job_store import JobStore


def job_dict(job_id: str | None = None, /, **overrides: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "schema": "framefleet.job/v1",
        "job_id": job_id or f"job-{uuid.uuid4().hex[:12]}",
        "model": "wan/tiny-test",
        "prompt": "a red fox running through snow",
        "width": 32,
        "height": 32,
        "num_frames": 9,
        "fps": 8,
        "steps": 4,
        "guidance": 5.0,
        "seed": 42,
        "priority": 5,
        "output": "s3://framefleet-output/videos/",
        "tags": {"team": "research", "customer": "acme", "project": "trailer"},
    }
    job.update(overrides)
    return job


def assignment(
    worker_id: str, spec: JobSpec, at: datetime, command_id: str = "assign-1"
) -> tuple[str, bytes]:
    """The control plane's `assign` of the job's first attempt to the worker's GPU 0: its
    topic and payload, for a worker's command handler."""
    command = Command(
        worker_id=worker_id,
        sent_at=at,
        command_id=command_id,
        kind=CommandKind.ASSIGN,
        job_id=spec.job_id,
        attempt=1,
        gpu_index=0,
        spec=spec,
    )
    return topic(worker_id, Channel.CMD), command.model_dump_json().encode()


def apply_decision(store: JobStore, job: JobRecord, decision: Decision, actor: str) -> JobRecord:
    """One decision written on its own, as the control plane writes a batch of them; a
    concurrent writer makes this raise (ConcurrentModification)."""
    move = as_move(job, decision)
    if move is None:
        return job
    (outcome,) = store.apply_moves([move], actor)
    if isinstance(outcome, FrameFleetError):
        raise outcome
    return outcome


def submission(job_id: str, message_id: str = "m", **overrides: object) -> Submission:
    return Submission(parse_job(job_dict(job_id, **overrides), now=None), message_id)


# When the demo's records were made (a fixed moment: records compare equal run to run).
RECORDED = datetime(2026, 12, 3, 12, tzinfo=UTC)


def record(job_id: str, state: JobState, deadline: datetime | None = None) -> JobRecord:
    body = demo_jobs(1, 7, RECORDED, 1.0)[0].body | {"job_id": job_id, "deadline": None}
    spec = parse_job(body, now=None)
    return JobRecord(job_id, state, 3, 1, 5, deadline, spec, RECORDED, RECORDED)
