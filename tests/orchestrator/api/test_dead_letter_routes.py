"""Dead letters over HTTP (issue 49): an operator lists the messages the intake refused, with
why; an admin token redrives one to the jobs queue (its job is stored once) or deletes one;
a message already moved is a 404, a team's token gets 403."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from typing import Any

import boto3

from orchestrator.api.auth import Scope, create_token
from tests.support.jobs import job_dict
from tests.support.local_services import REGION
from tests.support.served_api import ServedApi, dead_letter_queue
from tests.support.waits import wait_until


def test_an_operator_reads_redrives_and_deletes_dead_letters(
    api: ServedApi, moto_endpoint: str
) -> None:
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=moto_endpoint)
    dead = dead_letter_queue(api, moto_endpoint)
    # As the intake dead-letters: the body, and why in the message's attributes.
    why: dict[str, Any] = {
        "framefleet-reason": {"DataType": "String", "StringValue": "store_unavailable"}
    }
    job_id = f"redriven-{uuid.uuid4().hex[:8]}"
    kept = sqs.send_message(
        QueueUrl=dead, MessageBody=json.dumps(job_dict(job_id)), MessageAttributes=why
    )["MessageId"]
    junk = sqs.send_message(QueueUrl=dead, MessageBody="not a job", MessageAttributes=why)[
        "MessageId"
    ]

    letters = {
        letter["message_id"]: letter
        for letter in api.call("GET", "/v1/dead-letters", "reader").json()["letters"]
    }
    assert {kept, junk} <= set(letters)
    assert letters[junk]["body"] == "not a job"

    redriven = api.call("POST", f"/v1/dead-letters/{kept}/redrive")
    assert redriven.status == 200, redriven.body
    wait_until(lambda: api.store.find(job_id) is not None, 60, "the redriven job stored")
    assert api.call("POST", f"/v1/dead-letters/{kept}/redrive").status == 404  # moved

    assert api.call("DELETE", f"/v1/dead-letters/{junk}").status == 204
    assert api.call("DELETE", f"/v1/dead-letters/{junk}").status == 404
    left = {
        letter["message_id"] for letter in api.call("GET", "/v1/dead-letters").json()["letters"]
    }
    assert not {kept, junk} & left


def test_a_teams_token_and_a_reader_cannot_move_dead_letters(api: ServedApi) -> None:
    team = create_token(api.store.api_tokens, "red-admin", (Scope.ADMIN,), ("red",))[1]
    callers = replace(api, tokens={**api.tokens, "team": team})
    assert callers.call("GET", "/v1/dead-letters", "team").status == 403
    for role in ("team", "reader"):
        assert callers.call("POST", "/v1/dead-letters/abc-1/redrive", role).status == 403
        assert callers.call("DELETE", "/v1/dead-letters/abc-1", role).status == 403
    assert api.call("DELETE", "/v1/dead-letters/not%20an%20id").status == 422
