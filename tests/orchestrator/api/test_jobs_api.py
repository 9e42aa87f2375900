"""The job API over real HTTP against a running `framefleet serve`: submit (idempotent, with
the intake's validation), the status codes of auth and refusals, cancel in every state,
pagination and filters, a job's detail, and the video's presigned link."""

from __future__ import annotations

import base64
import socket
import uuid
from datetime import timedelta

import boto3
import pytest
import urllib3

from kernel.job_state import JobState
from orchestrator.store.job_pages import ProgressReport
from tests.support.jobs import job_dict
from tests.support.local_services import REGION
from tests.support.served_api import MAX_CONNECTIONS, RATE_PER_MINUTE, ServedApi
from tests.support.waits import wait_until


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def test_submit_is_idempotent_by_job_id(api: ServedApi) -> None:
    job = job_dict(new_id("idem"))
    first = api.call("POST", "/v1/jobs", "submitter", body=job)
    assert first.status == 201, first.body
    assert first.json()["state"] == "queued"
    assert first.headers["location"] == f"/v1/jobs/{job['job_id']}"
    again = api.call("POST", "/v1/jobs", "submitter", body=job)
    assert again.status == 200
    assert again.json()["job_id"] == job["job_id"]
    other = api.call("POST", "/v1/jobs", "submitter", body={**job, "prompt": "something else"})
    assert other.status == 409
    assert "is taken" in other.json()["detail"]
    assert api.store.get(job["job_id"]).spec.prompt == job["prompt"]


def test_an_invalid_job_gets_422_with_every_field_error(api: ServedApi) -> None:
    job = {**job_dict(new_id("bad")), "steps": "thirty", "width": -5, "priority": True}
    answer = api.call("POST", "/v1/jobs", "submitter", body=job)
    assert answer.status == 422
    errors = answer.json()["errors"]
    assert {line.split(":")[0] for line in errors} == {"steps", "width", "priority"}
    not_json = api.call("POST", "/v1/jobs", "submitter", raw=b'{"job_id": ')
    assert not_json.status == 422
    assert api.store.find(job["job_id"]) is None


def test_a_job_naming_a_model_the_registry_lacks_gets_422_and_costs_nothing(
    api: ServedApi,
) -> None:
    job = job_dict(new_id("typo"), model="wan/tiny-tset")
    answer = api.call("POST", "/v1/jobs", "submitter", body=job)
    assert answer.status == 422
    assert answer.json()["detail"] == "unknown_model"
    assert "'wan/tiny-tset' is not in the model registry" in answer.json()["errors"][0]
    assert api.store.find(job["job_id"]) is None


def test_an_input_the_models_family_does_not_take_gets_422(api: ServedApi) -> None:
    job = job_dict(new_id("img"), model="wan/tiny-test", image="s3://inputs-x/first.png")
    answer = api.call("POST", "/v1/jobs", "submitter", body=job)
    assert answer.status == 422
    assert answer.json()["detail"] == "bad_input"
    assert "takes no input image" in answer.json()["errors"][0]
    assert api.store.find(job["job_id"]) is None


def test_an_oversized_body_gets_413_declared_or_streamed(api: ServedApi) -> None:
    job = job_dict(new_id("big"), prompt="x" * 5000)  # the served limit is 4096 bytes
    assert api.call("POST", "/v1/jobs", "submitter", body=job).status == 413
    chunks = (b"x" * 1024 for _ in range(8))  # no Content-Length: sent chunked
    reply = api.http.request(
        "POST",
        api.base + "/v1/jobs",
        body=chunks,
        chunked=True,
        headers={"Authorization": f"Bearer {api.tokens['submitter']}"},
    )
    assert reply.status == 413
    assert api.store.find(job["job_id"]) is None


def test_tokens_401_without_or_with_a_bad_token_and_403_without_the_scope(api: ServedApi) -> None:
    assert api.call("GET", "/v1/jobs", None).status == 401
    assert api.call("GET", "/v1/jobs", None).headers["www-authenticate"].startswith("Bearer")
    bogus = api.call("GET", "/v1/jobs", None, headers={"Authorization": "Bearer ff_nope_x"})
    assert bogus.status == 401
    assert api.call("GET", "/v1/jobs", "revoked").status == 401
    assert api.call("POST", "/v1/jobs", "reader", body=job_dict()).status == 403
    assert api.call("GET", "/v1/jobs", "submitter").status == 403
    queued = new_id("scoped")
    assert api.call("POST", "/v1/jobs", "submitter", body=job_dict(queued)).status == 201
    assert api.call("POST", f"/v1/jobs/{queued}/cancel", "reader").status == 403
    assert api.call("GET", "/v1/jobs", "admin").status == 200


def test_a_token_over_its_rate_gets_429(api: ServedApi) -> None:
    statuses = [api.call("GET", "/v1/fleet", "limited") for _ in range(RATE_PER_MINUTE + 5)]
    refused = [a for a in statuses if a.status == 429]
    assert len(refused) >= 5
    assert int(refused[0].headers["retry-after"]) >= 1
    assert api.call("GET", "/v1/fleet", "reader").status == 200  # other tokens are not held


def _walk(api: ServedApi, job_id: str, path: tuple[JobState, ...]) -> None:
    for target in path:
        job = api.store.get(job_id)
        placed = target is JobState.ASSIGNED  # on a GPU of its own: one GPU, one attempt
        api.store.transition(
            job_id,
            target,
            expected_version=job.version,
            actor="test",
            reason="test",
            worker_id=f"i-{uuid.uuid4().hex[:17]}" if placed else None,
            gpu_index=0 if placed else None,
        )


def _running(api: ServedApi, job_id: str) -> None:
    _walk(api, job_id, (JobState.ASSIGNED, JobState.RUNNING))


_S = JobState
CANCEL_CASES = {
    _S.QUEUED: ((), 200, "now"),
    _S.ASSIGNED: ((_S.ASSIGNED,), 200, "at its next step"),
    _S.RUNNING: ((_S.ASSIGNED, _S.RUNNING), 200, "at its next step"),
    _S.CHECKPOINTING: ((_S.ASSIGNED, _S.RUNNING, _S.CHECKPOINTING), 200, "at its next step"),
    _S.PREEMPTED: ((_S.ASSIGNED, _S.RUNNING, _S.PREEMPTED), 200, "now"),
    _S.SUCCEEDED: ((_S.ASSIGNED, _S.RUNNING, _S.SUCCEEDED), 409, None),
    _S.FAILED: ((_S.FAILED,), 409, None),
    _S.CANCELLED: ((_S.CANCELLED,), 409, None),
}


@pytest.mark.parametrize("state", list(CANCEL_CASES))
def test_cancel_in_each_state(api: ServedApi, state: JobState) -> None:
    path, status, stops = CANCEL_CASES[state]
    job_id = new_id(f"cancel-{state.value}")
    assert api.call("POST", "/v1/jobs", "submitter", body=job_dict(job_id)).status == 201
    _walk(api, job_id, path)
    assert api.store.get(job_id).state is state
    answer = api.call("POST", f"/v1/jobs/{job_id}/cancel", "canceller", body={"reason": "no"})
    assert answer.status == status
    if stops is None:
        assert f"already ended: {state.value}" in answer.json()["detail"]
        assert api.store.get(job_id).state is state
        return
    assert answer.json()["stops"] == stops
    assert answer.json()["job"]["state"] == "cancelled"
    last = api.store.history(job_id)[-1]
    assert (last.to_state, last.actor, last.reason) == (
        _S.CANCELLED,
        "api:canceller",
        "cancelled: no",
    )


def test_cancel_of_an_unknown_job_is_404(api: ServedApi) -> None:
    assert api.call("POST", f"/v1/jobs/{new_id('none')}/cancel", "canceller").status == 404


def test_pages_by_cursor_with_filters(api: ServedApi) -> None:
    team = new_id("team")
    submitted = [new_id("page") for _ in range(7)]
    for job_id in submitted:
        body = job_dict(job_id, tags={"team": team})
        assert api.call("POST", "/v1/jobs", "submitter", body=body).status == 201
    seen: list[str] = []
    cursor = ""
    pages = 0
    while True:
        answer = api.call("GET", f"/v1/jobs?team={team}&limit=3{cursor}", "reader").json()
        seen += [job["job_id"] for job in answer["jobs"]]
        pages += 1
        if answer["next_cursor"] is None:
            break
        cursor = f"&cursor={answer['next_cursor']}"
    assert pages == 3
    assert seen == list(reversed(submitted))  # newest first, each once
    api.call("POST", f"/v1/jobs/{submitted[0]}/cancel", "canceller")
    cancelled = api.call("GET", f"/v1/jobs?team={team}&state=cancelled", "reader").json()
    assert [job["job_id"] for job in cancelled["jobs"]] == [submitted[0]]
    assert api.call("GET", "/v1/jobs?cursor=not-ours", "reader").status == 400
    assert api.call("GET", "/v1/jobs?state=sleeping", "reader").status == 422


def test_one_job_shows_its_history_progress_and_estimate(api: ServedApi) -> None:
    job_id = new_id("detail")
    body = job_dict(job_id, steps=30)
    assert api.call("POST", "/v1/jobs", "submitter", body=body).status == 201
    _running(api, job_id)
    record = api.store.get(job_id)
    started = record.updated_at
    api.store.pages.record_progress([ProgressReport(job_id, record.attempt, 5, 30, started)])
    later = started + timedelta(seconds=20)  # ten steps in 20 s
    api.store.pages.record_progress([ProgressReport(job_id, record.attempt, 15, 30, later)])
    detail = api.call("GET", f"/v1/jobs/{job_id}", "reader").json()
    assert detail["state"] == "running"
    assert detail["spec"]["prompt"] == body["prompt"]
    assert [line["to_state"] for line in detail["history"]] == ["queued", "assigned", "running"]
    assert detail["attempts"][0]["worker_id"].startswith("i-")
    assert detail["progress"]["step"] == 15
    assert detail["progress"]["seconds_per_step"] == 2.0
    assert detail["estimated_finish"] == (later + timedelta(seconds=30)).isoformat().replace(
        "+00:00", "Z"
    )
    assert detail["deadline_risk"] in ("none", "on_track")
    assert api.call("GET", f"/v1/jobs/{new_id('none')}", "reader").status == 404


def test_the_output_link_is_presigned_and_fetches_the_video(
    api: ServedApi, moto_endpoint: str
) -> None:
    job_id = new_id("video")
    body = job_dict(job_id)
    assert api.call("POST", "/v1/jobs", "submitter", body=body).status == 201
    assert api.call("GET", f"/v1/jobs/{job_id}/output", "reader").status == 409
    _running(api, job_id)
    job = api.store.get(job_id)
    api.store.transition(
        job_id, JobState.SUCCEEDED, expected_version=job.version, actor="test", reason="finished"
    )
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=moto_endpoint)
    spec = job.spec
    s3.create_bucket(Bucket=spec.output_bucket)
    s3.put_object(
        Bucket=spec.output_bucket,
        Key=f"{spec.output_prefix}{job_id}.mp4",
        Body=b"\x00\x00\x00\x18ftypmp42",
    )
    link = api.call("GET", f"/v1/jobs/{job_id}/output", "reader").json()
    assert "X-Amz-Signature" in link["url"]
    fetched = urllib3.request("GET", link["url"])
    assert fetched.status == 200
    assert fetched.data[4:8] == b"ftyp"


def test_tokens_never_reach_the_log(api: ServedApi) -> None:
    api.call("GET", "/v1/jobs", "admin")
    api.call("GET", "/v1/jobs", "revoked")
    log = api.log.read_text()
    assert "GET /v1/jobs" in log  # the access log is on
    for token in api.tokens.values():
        assert token not in log
        assert token.split("_", 2)[2] not in log


def test_an_output_the_workers_may_not_write_is_refused_at_submit(api: ServedApi) -> None:
    job = job_dict(new_id("elsewhere"), output="s3://someone-elses-bucket/videos/")
    answer = api.call("POST", "/v1/jobs", "submitter", body=job)
    assert answer.status == 422
    (error,) = answer.json()["errors"]
    assert error.startswith("output: ")
    assert "s3://framefleet-output/videos/" in error
    assert api.store.find(job["job_id"]) is None


CURSOR_WITH_NUL = base64.urlsafe_b64encode(b"2026-01-01T00:00:00+00:00|a\x00b").decode()


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/v1/jobs?created_since=2026-01-01T00:00:00", 422),  # no time zone
        ("/v1/jobs?team=a%00b", 422),  # PostgreSQL answers a NUL with an error
        ("/v1/jobs?cursor=" + CURSOR_WITH_NUL, 400),
        ("/v1/costs?since=2026-01-01T00:00:00", 422),
        ("/v1/events?after=18446744073709551616", 422),  # past the store's 64-bit ids
    ],
)
def test_bad_query_values_are_4xx_not_500(api: ServedApi, path: str, status: int) -> None:
    assert api.call("GET", path, "reader").status == status


def test_half_sent_requests_cannot_use_up_the_servers_connections(api: ServedApi) -> None:
    """Slow clients that never finish their headers: past the connection limit a new client
    gets a 503 at once (not a hang, not a dead process), and service comes back when they go."""
    host, port = api.base.removeprefix("http://").split(":")
    stalled = []
    try:
        for _ in range(MAX_CONNECTIONS + 4):
            sock = socket.create_connection((host, int(port)), timeout=5)
            sock.sendall(b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
            stalled.append(sock)
        # Once the server has taken them all in (accepting is asynchronous to connect()).
        refused = lambda: api.call("GET", "/v1/jobs", "reader").status == 503  # noqa: E731
        wait_until(refused, timeout=20, what="a 503 past the connection limit")
        assert api.process.poll() is None
    finally:
        for sock in stalled:
            sock.close()
    serving = lambda: api.call("GET", "/v1/jobs", "reader").status == 200  # noqa: E731
    wait_until(serving, timeout=20, what="the API to serve again")


def test_a_job_held_by_its_quota_says_why(api: ServedApi) -> None:
    job = job_dict(new_id("held"))
    assert api.call("POST", "/v1/jobs", "submitter", body=job).status == 201
    why = "quota: team <i>ads</i> runs 1 of its 1 * GPUs in use, no share is idle"
    api.store.wait_notes.note_waits({job["job_id"]: why})
    detail = api.call("GET", f"/v1/jobs/{job['job_id']}", "admin").json()
    assert detail["waiting_for"] == why
