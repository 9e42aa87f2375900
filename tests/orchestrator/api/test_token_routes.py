"""Tokens over HTTP (issue 49): an operator's admin token makes a team's token (shown once),
lists every token (never a token or its digest), and revokes one, whose next request is
refused; no other token may do any of it, and bad requests are refused with a reason."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from orchestrator.api.auth import Scope, create_token
from tests.support.served_api import ServedApi


def test_an_operator_makes_lists_and_revokes_a_producers_token(api: ServedApi) -> None:
    expires = (datetime.now(UTC) + timedelta(days=30)).isoformat()
    made = api.call(
        "POST",
        "/v1/tokens",
        body={
            "name": "ci-render",
            "scopes": ["read", "submit"],
            "teams": ["red"],
            "expires_at": expires,
        },
    )
    assert made.status == 201, made.json()
    new = made.json()
    assert new["token"].startswith("ff_")
    assert new["teams"] == ["red"]
    assert new["scopes"] == ["read", "submit"]
    producer = replace(api, tokens={**api.tokens, "producer": new["token"]})
    assert producer.call("GET", "/v1/jobs", "producer").status == 200
    assert producer.call("GET", "/v1/fleet", "producer").status == 403  # a team's token

    listed = api.call("GET", "/v1/tokens").json()["tokens"]
    mine = [t for t in listed if t["token_id"] == new["token_id"]]
    assert len(mine) == 1
    assert mine[0]["revoked_at"] is None
    assert new["token"] not in json.dumps(listed)  # never shown again
    assert all("token" not in t and "sha256" not in t for t in listed)

    assert api.call("DELETE", f"/v1/tokens/{new['token_id']}").status == 204
    assert producer.call("GET", "/v1/jobs", "producer").status == 401
    assert api.call("DELETE", f"/v1/tokens/{new['token_id']}").status == 404  # not live


def test_only_an_admin_token_of_every_team_manages_tokens(api: ServedApi) -> None:
    team_admin = create_token(api.store.api_tokens, "red-admin", (Scope.ADMIN,), ("red",))[1]
    callers = replace(api, tokens={**api.tokens, "team-admin": team_admin})
    body = {"name": "escalation", "scopes": ["admin"]}
    for role in ("reader", "submitter", "console", "team-admin"):
        assert callers.call("POST", "/v1/tokens", role, body=body).status == 403, role
        assert callers.call("GET", "/v1/tokens", role).status == 403, role
        assert callers.call("DELETE", "/v1/tokens/0123456789ab", role).status == 403, role
    assert callers.call("GET", "/v1/tokens", None).status == 401


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ({"name": "x", "scopes": ["root"]}, "scopes"),
        ({"name": "x", "scopes": []}, "scopes"),
        ({"name": "line\nbreak", "scopes": ["read"]}, "name"),
        ({"name": "x", "scopes": ["read"], "teams": ["red team\x00"]}, "teams"),
        ({"name": "x", "scopes": ["read"], "expires_at": "2020-01-01T00:00:00Z"}, "past"),
        ({"name": "x", "scopes": ["read"], "expires_at": "2099-01-01T00:00:00"}, "expires_at"),
        ({"name": "x", "scopes": ["read"], "owner": "me"}, "owner"),
    ],
)
def test_a_bad_token_request_is_refused_with_its_reason(
    api: ServedApi, body: dict[str, object], why: str
) -> None:
    refused = api.call("POST", "/v1/tokens", body=body)
    assert refused.status == 422
    assert why in json.dumps(refused.body)


def test_a_malformed_token_id_is_refused(api: ServedApi) -> None:
    assert api.call("DELETE", "/v1/tokens/..%2Fjobs").status in (404, 422)
    assert api.call("DELETE", "/v1/tokens/NOT-AN-ID").status == 422
