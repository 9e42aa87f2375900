"""Tokens belong to teams: a team's token lists, reads, downloads, cancels, streams and submits
its teams' jobs only (another team's job is a 404, as if there were none), and its costs are
its teams' jobs'; the fleet needs a token of every team; an expired token is refused like a
revoked one."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

from kernel.clock import SystemClock
from orchestrator.api.auth import Scope, create_token
from tests.support.jobs import job_dict
from tests.support.served_api import ServedApi

EVERYTHING = (Scope.READ, Scope.SUBMIT, Scope.CANCEL)


def team_job(api: ServedApi, team: str) -> str:
    job_id = f"{team}-{uuid.uuid4().hex[:10]}"
    body = job_dict(job_id, tags={"team": team})
    assert api.call("POST", "/v1/jobs", "admin", body=body).status == 201
    return job_id


def with_token(api: ServedApi, role: str, token: str) -> ServedApi:
    return ServedApi(
        api.base, api.store, {**api.tokens, role: token}, api.log, api.process, api.http
    )


def test_a_teams_token_sees_and_moves_its_teams_jobs_only(api: ServedApi) -> None:
    red_job, blue_job = team_job(api, "red"), team_job(api, "blue")
    red = with_token(
        api, "red", create_token(api.store.api_tokens, "red-ci", EVERYTHING, ("red",))[1]
    )

    listed = {job["job_id"] for job in red.call("GET", "/v1/jobs?limit=500", "red").json()["jobs"]}
    assert red_job in listed
    assert blue_job not in listed
    assert all(job_id.startswith("red-") for job_id in listed)
    assert red.call("GET", f"/v1/jobs/{red_job}", "red").status == 200
    for path in (f"/v1/jobs/{blue_job}", f"/v1/jobs/{blue_job}/output"):
        assert red.call("GET", path, "red").status == 404
    assert red.call("POST", f"/v1/jobs/{blue_job}/cancel", "red").status == 404
    assert api.store.get(blue_job).state.value == "queued"

    foreign = job_dict(f"red-{uuid.uuid4().hex[:8]}", tags={"team": "blue"})
    refused = red.call("POST", "/v1/jobs", "red", body=foreign)
    assert refused.status == 403
    assert "tags.team" in refused.json()["detail"]
    no_team = job_dict(f"red-{uuid.uuid4().hex[:8]}", tags={})
    assert red.call("POST", "/v1/jobs", "red", body=no_team).status == 403
    own = job_dict(f"red-{uuid.uuid4().hex[:8]}", tags={"team": "red"})
    assert red.call("POST", "/v1/jobs", "red", body=own).status == 201

    assert red.call("GET", "/v1/fleet", "red").status == 403
    assert (
        red.call("GET", "/v1/costs", "red").status == 200
    )  # its teams' (tests/orchestrator/costs)
    assert api.call("GET", "/v1/fleet", "reader").status == 200  # every team's token


def test_a_teams_event_stream_carries_its_teams_jobs_only(api: ServedApi) -> None:
    start = api.store.pages.last_job_event_id()
    blue_job = team_job(api, "blue")  # first: its event comes before the red job's
    red_job = team_job(api, "red")
    token = create_token(api.store.api_tokens, "red-stream", (Scope.READ,), ("red",))[1]
    reply = api.http.request(
        "GET",
        f"{api.base}/v1/events?after={start}",
        headers={"Authorization": f"Bearer {token}"},
        preload_content=False,
        timeout=20,
    )
    assert reply.status == 200
    seen: list[str] = []
    for line in reply.stream(1024, decode_content=True):  # until its one job shows
        text = line.decode()
        seen += [
            json.loads(data.removeprefix("data:").strip())["job_id"]
            for data in text.splitlines()
            if data.startswith("data:")
        ]
        if red_job in seen:
            break
    reply.release_conn()
    assert red_job in seen
    assert blue_job not in seen


def test_an_expired_token_is_refused(api: ServedApi) -> None:
    past = SystemClock().now() - timedelta(seconds=1)
    token = create_token(api.store.api_tokens, "old", (Scope.READ,), None, past)[1]
    expired = with_token(api, "old", token)
    assert expired.call("GET", "/v1/jobs", "old").status == 401
    later = SystemClock().now() + timedelta(days=1)
    fresh = with_token(
        api, "new", create_token(api.store.api_tokens, "new", (Scope.READ,), None, later)[1]
    )
    assert fresh.call("GET", "/v1/jobs", "new").status == 200


def test_a_taken_job_id_answers_the_same_whichever_team_holds_it(api: ServedApi) -> None:
    blue_job = team_job(api, "blue")
    red = with_token(
        api, "red", create_token(api.store.api_tokens, "red-probe", EVERYTHING, ("red",))[1]
    )
    red_job = f"red-{uuid.uuid4().hex[:8]}"
    assert (
        red.call("POST", "/v1/jobs", "red", body=job_dict(red_job, tags={"team": "red"})).status
        == 201
    )
    # Red's own id under another spec, and blue's id: one answer, naming no team.
    own = red.call("POST", "/v1/jobs", "red", body=job_dict(red_job, tags={"team": "red"}, steps=7))
    probe = red.call("POST", "/v1/jobs", "red", body=job_dict(blue_job, tags={"team": "red"}))
    assert own.status == probe.status == 409
    assert own.json()["detail"].replace(red_job, "ID") == probe.json()["detail"].replace(
        blue_job, "ID"
    )
    assert "blue" not in json.dumps(probe.body).replace(blue_job, "")
