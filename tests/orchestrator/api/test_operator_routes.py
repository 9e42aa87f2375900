"""A job's logs and the GPUs' health over HTTP (issue 49): each attempt's lines as the worker
wrote them, for whoever may see the job (another team's: 404); the faults and quarantines for
an operator's token only."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime

from kernel.fleet_facts import GpuFault, GpuFaultKind
from orchestrator.api.auth import Scope, create_token
from tests.support.fleet_history import job_with_log
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
