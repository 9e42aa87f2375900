"""An operator's changes over HTTP (issue 49): a queued job's priority and deadline, a failed
job's retry as a new job, a quarantined GPU's release, and the history view as JSON. Each for
an operator's admin token only; each refused clearly where it cannot apply."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from kernel.fleet_facts import GpuFault, GpuFaultKind
from kernel.job_state import JobState
from orchestrator.api.auth import Scope, create_token
from tests.support.jobs import job_dict
from tests.support.served_api import ServedApi


def _queued(api: ServedApi, prefix: str) -> dict[str, object]:
    job = job_dict(f"{prefix}-{uuid.uuid4().hex[:10]}")
    assert api.call("POST", "/v1/jobs", "submitter", body=job).status == 201
    return job


def _team_admin(api: ServedApi) -> ServedApi:
    token = create_token(api.store.api_tokens, "red-admin", (Scope.ADMIN,), ("red",))[1]
    return replace(api, tokens={**api.tokens, "red-admin": token})


def test_an_operator_changes_a_queued_jobs_priority_and_deadline(api: ServedApi) -> None:
    job = _queued(api, "bump")
    job_id = str(job["job_id"])
    deadline = (datetime.now(UTC) + timedelta(hours=6)).replace(microsecond=0)
    change = {"priority": 9, "deadline": deadline.isoformat()}
    answer = api.call("PATCH", f"/v1/jobs/{job_id}", "admin", body=change)
    assert answer.status == 200, answer.body
    stored = api.store.get(job_id)
    assert (stored.spec.priority, stored.spec.deadline) == (9, deadline)
    assert stored.spec.prompt == job["prompt"]
    assert "priority 5 -> 9" in api.store.history(job_id)[-1].reason
    # The producer's resend of what it submitted is still the same job, not a conflict.
    assert api.call("POST", "/v1/jobs", "submitter", body=job).status == 200
    cleared = api.call("PATCH", f"/v1/jobs/{job_id}", "admin", body={"deadline": None})
    assert cleared.status == 200
    assert api.store.get(job_id).spec.deadline is None
    assert api.store.get(job_id).spec.priority == 9


def test_a_change_is_refused_clearly(api: ServedApi) -> None:
    job_id = str(_queued(api, "refused")["job_id"])
    path = f"/v1/jobs/{job_id}"
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    assert api.call("PATCH", path, "admin", body={"deadline": past}).status == 422
    assert api.call("PATCH", path, "admin", body={}).status == 422
    assert api.call("PATCH", path, "admin", body={"priority": 10}).status == 422
    assert api.call("PATCH", path, "admin", body={"prompt": "other"}).status == 422
    assert api.call("PATCH", path, "reader", body={"priority": 1}).status == 403
    assert _team_admin(api).call("PATCH", path, "red-admin", body={"priority": 1}).status == 403
    assert api.call("PATCH", "/v1/jobs/no-such-job", "admin", body={"priority": 1}).status == 404
    job = api.store.get(job_id)
    api.store.transition(
        job_id, JobState.CANCELLED, expected_version=job.version, actor="test", reason="test"
    )
    gone = api.call("PATCH", path, "admin", body={"priority": 1})
    assert gone.status == 409
    assert "only a queued job changes" in gone.json()["detail"]
    assert api.store.get(job_id).spec.priority == 5


def _fail(api: ServedApi, job_id: str) -> None:
    job = api.store.get(job_id)
    api.store.transition(
        job_id, JobState.FAILED, expected_version=job.version, actor="test", reason="NaN latents"
    )


def test_a_failed_job_is_retried_as_a_new_job_once(api: ServedApi) -> None:
    job = _queued(api, "retried")
    job_id = str(job["job_id"])
    assert api.call("POST", f"/v1/jobs/{job_id}/retry", "admin").status == 409  # queued
    _fail(api, job_id)
    first = api.call("POST", f"/v1/jobs/{job_id}/retry", "admin", body={"priority": 8})
    assert first.status == 201, first.body
    assert first.json()["job_id"] == f"{job_id}-r1"
    assert first.headers["location"] == f"/v1/jobs/{job_id}-r1"
    retried = api.store.get(f"{job_id}-r1")
    assert (retried.state, retried.spec.priority, retried.spec.prompt) == (
        JobState.QUEUED,
        8,
        job["prompt"],
    )
    assert f"a retry of job {job_id}" in api.store.history(f"{job_id}-r1")[0].reason
    assert api.store.get(job_id).state is JobState.FAILED  # its end stays as it was
    again = api.call("POST", f"/v1/jobs/{job_id}/retry", "admin", body={"priority": 8})
    assert (again.status, again.json()["job_id"]) == (200, f"{job_id}-r1")
    assert api.call("POST", f"/v1/jobs/{job_id}/retry", "reader").status == 403
    _fail(api, f"{job_id}-r1")
    second = api.call("POST", f"/v1/jobs/{job_id}-r1/retry", "admin")
    assert second.json()["job_id"] == f"{job_id}-r2"


def test_a_retry_past_its_deadline_asks_for_a_new_one(api: ServedApi) -> None:
    job_id = str(_queued(api, "late")["job_id"])
    queued = api.store.get(job_id)
    passed = datetime.now(UTC) - timedelta(hours=1)  # as if it had been missed
    api.store.changes.replace_queued_spec(
        queued.spec.model_copy(update={"deadline": passed}),
        expected_version=queued.version,
        actor="test",
        reason="test",
    )
    _fail(api, job_id)
    refused = api.call("POST", f"/v1/jobs/{job_id}/retry", "admin")
    assert refused.status == 409
    assert "deadline has passed" in refused.json()["detail"]
    answer = api.call("POST", f"/v1/jobs/{job_id}/retry", "admin", body={"deadline": None})
    assert answer.status == 201
    assert api.store.get(f"{job_id}-r1").spec.deadline is None


def test_an_operator_releases_a_quarantined_gpu(api: ServedApi) -> None:
    worker = f"i-{uuid.uuid4().hex[:17]}"
    at = datetime(2026, 12, 7, 9, tzinfo=UTC)
    for kind in (GpuFaultKind.SLOW, GpuFaultKind.QUARANTINE):
        api.store.faults.record_gpu_fault(GpuFault(worker, worker, 2, kind, "3.1x slow", at))
    path = f"/v1/gpus/{worker}/2/release"
    assert api.call("POST", path, "reader").status == 403
    assert _team_admin(api).call("POST", path, "red-admin").status == 403
    answer = api.call("POST", path, "admin")
    assert answer.status == 200, answer.body
    assert answer.json()["kind"] == "release"
    assert (worker, 2) not in api.store.faults.quarantined_gpus()
    quarantined = api.call("GET", "/v1/gpus", "reader").json()["quarantined"]
    assert {"worker_id": worker, "gpu_index": 2} not in quarantined
    assert api.call("POST", path, "admin").status == 404  # not quarantined now
    assert api.call("POST", f"/v1/gpus/{worker}/99/release", "admin").status == 422


def test_the_history_view_is_json_for_an_operator(api: ServedApi) -> None:
    answer = api.call("GET", "/v1/history", "reader")
    assert answer.status == 200, answer.body
    history = answer.json()
    assert len(history["points"]) == 48
    assert set(history["points"][-1]["jobs"]) == {s.value for s in JobState}
    assert history["step_seconds"] == 1800.0
    red = create_token(api.store.api_tokens, "red-reader", (Scope.READ,), ("red",))[1]
    team = replace(api, tokens={**api.tokens, "red": red})
    assert team.call("GET", "/v1/history", "red").status == 403
    backwards = "/v1/history?since=2026-12-07T10:00:00Z&until=2026-12-07T09:00:00Z"
    assert api.call("GET", backwards, "reader").status == 400


def test_the_money_page_groupings_are_json_and_add_up(api: ServedApi) -> None:
    total = api.call("GET", "/v1/costs?period=week", "reader").json()["total_usd"]
    for by in ("team", "model", "pool", "day"):
        answer = api.call("GET", f"/v1/costs/groups?by={by}&period=week", "reader")
        assert answer.status == 200, answer.body
        groups = answer.json()
        assert groups["total_usd"] == total
        assert sum(Decimal(g["usd"]) for g in groups["groups"]) == Decimal(total)
    assert api.call("GET", "/v1/costs/groups?by=colour", "reader").status == 422
