"""The pure parts: deadline risk and the estimated finish, the cursor, tokens and scopes, and
the recorder that takes workers' progress from heartbeats into the store."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from kernel.clock import FakeClock
from kernel.job_record import JobRecord, Reservation
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.worker_protocol import JobProgress
from orchestrator.api.auth import Scope, UnknownScope, caller_of, create_token, parse_scopes
from orchestrator.api.models import DeadlineRisk
from orchestrator.api.views import deadline_risk, decode_cursor, encode_cursor, estimated_finish
from orchestrator.control.progress import ProgressRecorder
from orchestrator.store.job_pages import ProgressReport, StoredProgress
from orchestrator.store.job_store import JobStore
from tests.support.jobs import job_dict, submission

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def record(state: JobState, deadline: datetime | None = None, **fields: object) -> JobRecord:
    spec = parse_job(job_dict("risk-1", steps=30), now=None)
    base = JobRecord("risk-1", state, 3, 1, 5, deadline, spec, NOW, NOW)
    return replace(base, **fields)  # type: ignore[arg-type]


def test_the_estimate_follows_the_measured_pace_then_the_planned_one() -> None:
    running = record(JobState.RUNNING)
    pace = StoredProgress(1, 10, 30, NOW, 0, NOW - timedelta(seconds=20))  # 2 s a step
    assert estimated_finish(running, pace, None, NOW) == NOW + timedelta(seconds=40)
    queued = record(JobState.QUEUED, checkpoint_step=10)
    planned = Reservation("risk-1", "", False, NOW, seconds_per_step=3.0, margin_seconds=100)
    assert estimated_finish(queued, None, planned, NOW) == NOW + timedelta(seconds=160)
    assert estimated_finish(queued, None, None, NOW) is None
    stale = replace(pace, attempt=0)  # an earlier attempt's pace is not this one's
    assert estimated_finish(running, stale, None, NOW) is None


@pytest.mark.parametrize(
    ("state", "deadline", "finish", "updated", "risk"),
    [
        (JobState.QUEUED, None, None, NOW, DeadlineRisk.NONE),
        (
            JobState.RUNNING,
            NOW + timedelta(hours=2),
            NOW + timedelta(hours=1),
            NOW,
            DeadlineRisk.ON_TRACK,
        ),
        (
            JobState.RUNNING,
            NOW + timedelta(hours=2),
            NOW + timedelta(hours=3),
            NOW,
            DeadlineRisk.AT_RISK,
        ),
        (JobState.QUEUED, NOW + timedelta(minutes=10), None, NOW, DeadlineRisk.AT_RISK),
        (JobState.QUEUED, NOW + timedelta(hours=5), None, NOW, DeadlineRisk.UNKNOWN),
        (JobState.RUNNING, NOW - timedelta(minutes=1), None, NOW, DeadlineRisk.LATE),
        (JobState.SUCCEEDED, NOW, None, NOW - timedelta(minutes=1), DeadlineRisk.MET),
        (JobState.SUCCEEDED, NOW - timedelta(minutes=5), None, NOW, DeadlineRisk.MISSED),
        (JobState.CANCELLED, NOW - timedelta(minutes=5), None, NOW, DeadlineRisk.NONE),
    ],
)
def test_deadline_risk(
    state: JobState,
    deadline: datetime | None,
    finish: datetime | None,
    updated: datetime,
    risk: DeadlineRisk,
) -> None:
    assert deadline_risk(record(state, deadline, updated_at=updated), finish, NOW) is risk


def test_a_cursor_round_trips_and_anything_else_is_refused() -> None:
    job = record(JobState.QUEUED)
    cursor = decode_cursor(encode_cursor(job))
    assert cursor is not None
    assert (cursor.created_at, cursor.job_id) == (NOW, "risk-1")
    for bad in ("", "!!!", "bm90IGEgY3Vyc29y", "MjAyNi0xMi0wNFQxMjowMDowMHxh" * 20):
        assert decode_cursor(bad) is None


def test_tokens_are_stored_as_digests_and_revocable(store: JobStore) -> None:
    token_id, token = create_token(store.api_tokens, "ci", parse_scopes("read, submit"))
    assert token.startswith(f"ff_{token_id}_")
    assert all(token not in repr(stored) for stored in store.api_tokens.tokens())
    caller = caller_of(store.api_tokens, token, NOW)
    assert caller is not None
    assert caller.may(Scope.SUBMIT)
    assert not caller.may(Scope.CANCEL)
    assert caller_of(store.api_tokens, token + "x", NOW) is None
    assert caller_of(store.api_tokens, "x" * 10_000, NOW) is None
    assert store.api_tokens.revoke_token(token_id)
    assert not store.api_tokens.revoke_token(token_id)
    assert caller_of(store.api_tokens, token, NOW) is None
    admin = caller_of(
        store.api_tokens, create_token(store.api_tokens, "ops", (Scope.ADMIN,))[1], NOW
    )
    assert admin is not None
    assert admin.may(Scope.CANCEL)
    with pytest.raises(UnknownScope):
        parse_scopes("read,root")


class Heard:
    def __init__(self) -> None:
        self.now: list[tuple[JobProgress, datetime]] = []

    def progress(self) -> list[tuple[JobProgress, datetime]]:
        return self.now


async def test_progress_goes_to_the_store_only_when_a_step_changes(
    store: JobStore, clock: FakeClock
) -> None:
    store.intake.accept_batch([submission("progress-1")])
    heard = Heard()
    recorder = ProgressRecorder(heard, store.pages, clock)
    at = clock.now()
    heard.now = [
        (JobProgress(job_id="progress-1", attempt=1, gpu_index=0, step=3, total_steps=30), at)
    ]
    first = recorder.changed()
    recorder.write(first)
    recorder.remember(first)
    assert recorder.changed() == []  # the same step again: nothing to write
    heard.now = [
        (
            JobProgress(job_id="progress-1", attempt=1, gpu_index=0, step=9, total_steps=30),
            at + timedelta(seconds=12),
        )
    ]
    second = recorder.changed()
    recorder.write(second)
    stored = store.pages.progress_of("progress-1")
    assert stored is not None
    assert (stored.step, stored.first_step, stored.seconds_per_step()) == (9, 3, 2.0)
    heard.now = [
        (JobProgress(job_id="progress-2", attempt=1, gpu_index=0, step=1, total_steps=30), at)
    ]
    recorder.write(recorder.changed())  # a job the store does not know is dropped
    assert store.pages.progress_of("progress-2") is None


def test_a_new_attempt_starts_its_pace_anew(store: JobStore, clock: FakeClock) -> None:
    store.intake.accept_batch([submission("progress-3")])
    at = clock.now()
    store.pages.record_progress([ProgressReport("progress-3", 1, 20, 30, at)])
    store.pages.record_progress(
        [ProgressReport("progress-3", 2, 20, 30, at + timedelta(seconds=5))]
    )
    store.pages.record_progress(
        [ProgressReport("progress-3", 2, 25, 30, at + timedelta(seconds=15))]
    )
    stored = store.pages.progress_of("progress-3")
    assert stored is not None
    assert (stored.attempt, stored.first_step, stored.seconds_per_step()) == (2, 20, 2.0)
