"""A job's logs and the GPUs' health over HTTP (issue 49): each attempt's lines as the worker
wrote them, for whoever may see the job (another team's: 404); the faults and quarantines for
an operator's token only."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime

from kernel.fleet_facts import GpuFault, GpuFaultKind
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from orchestrator.api.auth import Scope, create_token
from orchestrator.notices.service import drafter
from tests.support.fleet_history import job_with_log
from tests.support.jobs import job_dict
from tests.support.served_api import ServedApi


def test_a_jobs_logs_are_given_per_attempt_to_whoever_sees_the_job(
    api: ServedApi, moto_endpoint: str
) -> None:
    job_id = f"logged-{uuid.uuid4().hex[:8]}"
    lines = "INFO job started\nINFO step 3 of 30 <b>as text</b>\n"
    job_with_log(api.store, moto_endpoint, job_id, lines)

    logs = api.call("GET", f"/v1/jobs/{job_id}/logs", "reader").json()
    assert logs == {"job_id": job_id, "attempts": [{"attempt": 1, "log": lines}]}
    red = create_token(api.store.api_tokens, "red", (Scope.READ,), ("red",))[1]
    other_team = replace(api, tokens={**api.tokens, "red": red})
    assert other_team.call("GET", f"/v1/jobs/{job_id}/logs", "red").status == 404
    assert api.call("GET", "/v1/jobs/no-such-job/logs", "reader").status == 404


def test_an_operator_reads_the_gpus_faults_and_quarantines(api: ServedApi) -> None:
    worker = f"i-{uuid.uuid4().hex[:17]}"
    at = datetime(2026, 12, 7, 9, tzinfo=UTC)
    for kind in (GpuFaultKind.ERRORS, GpuFaultKind.QUARANTINE):
        api.store.faults.record_gpu_fault(
            GpuFault(worker, worker, 1, kind, f"XID 79 ({kind.value})", at, "a-job")
        )
    health = api.call("GET", "/v1/gpus", "reader").json()
    mine = [f for f in health["faults"] if f["worker_id"] == worker]
    assert [f["kind"] for f in mine] == ["quarantine", "errors"]  # newest first
    assert {"worker_id": worker, "gpu_index": 1} in health["quarantined"]
    red = create_token(api.store.api_tokens, "red-ops", (Scope.READ,), ("red",))[1]
    team = replace(api, tokens={**api.tokens, "red": red})
    assert team.call("GET", "/v1/gpus", "red").status == 403


def test_an_operator_lists_dead_notices_and_delivers_one_again(api: ServedApi) -> None:
    notices = api.store.notices
    far = datetime(2100, 1, 1, tzinfo=UTC)
    draft = drafter(("webhook",))
    notices.relay(draft, far)  # the cursor starts (if no one started it)
    job_id = f"hooked-{uuid.uuid4().hex[:8]}"
    hook = {"webhook": "https://hooks.example.com/ff"}
    spec = parse_job(job_dict(job_id, notify=hook), now=None)
    api.store.intake.accept_batch([Submission(spec, f"m-{job_id}")])
    api.store.transition(job_id, JobState.FAILED, expected_version=1, actor="t", reason="t")
    notices.relay(draft, far)
    (row,) = notices.notices(job_id=job_id)
    notices.failed(row.id, 12, "HTTP 500", None)

    dead = api.call("GET", f"/v1/notices?state=dead&job_id={job_id}", "reader").json()
    ((shown),) = dead["notices"]
    assert (shown["kind"], shown["attempts"], shown["last_error"]) == ("job.failed", 12, "HTTP 500")
    assert api.call("POST", f"/v1/notices/{row.id}/redeliver", "reader").status == 403
    assert api.call("POST", f"/v1/notices/{row.id}/redeliver").status == 202
    assert notices.notices(job_id=job_id)[0].state == "pending"
    assert api.call("POST", f"/v1/notices/{row.id}/redeliver").status == 404  # not dead now
