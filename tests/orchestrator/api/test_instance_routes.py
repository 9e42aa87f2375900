"""An instance over HTTP (issue 49): its record and history for an operator; an admin token
asks to drain it (its jobs finish) or take it back (they move now), which the control plane
and the autoscaler carry out as a scale-in; the first ask holds; an instance not alive is a
404, a team's or a reader's token gets 403."""

from __future__ import annotations

from dataclasses import replace

from kernel.job_record import DrainKind
from orchestrator.api.auth import Scope, create_token
from tests.support.served_api import ServedApi, alive_instance


def test_an_operator_reads_an_instance_and_asks_to_drain_it(api: ServedApi) -> None:
    instance_id = alive_instance(api)
    record = api.call("GET", f"/v1/instances/{instance_id}", "reader").json()
    assert record["alive"] is True

    asked = api.call("POST", f"/v1/instances/{instance_id}/drain")
    assert asked.status == 202, asked.body
    assert asked.json()["kind"] == "rebalance"
    request = api.store.instance_records.drain_requests()[instance_id]
    assert request.kind is DrainKind.REBALANCE
    # Asked again, the other way: the first ask holds, and the answer says so.
    again = api.call("POST", f"/v1/instances/{instance_id}/terminate")
    assert again.status == 202
    assert again.json()["kind"] == "rebalance"

    history = api.call("GET", f"/v1/instances/{instance_id}", "reader").json()["history"]
    assert history[-1]["to_state"] == "draining"
    assert history[-1]["actor"].startswith("operator token ")


def test_taking_an_instance_back_moves_its_jobs_now(api: ServedApi) -> None:
    instance_id = alive_instance(api)
    asked = api.call("POST", f"/v1/instances/{instance_id}/terminate")
    assert asked.json()["kind"] == "scale-in"
    assert api.store.instance_records.drain_requests()[instance_id].kind is DrainKind.SCALE_IN


def test_who_may_ask_and_of_which_instance(api: ServedApi) -> None:
    instance_id = alive_instance(api)
    red = create_token(api.store.api_tokens, "red-admin", (Scope.ADMIN,), ("red",))[1]
    callers = replace(api, tokens={**api.tokens, "red": red})
    for role in ("red", "reader"):
        assert callers.call("POST", f"/v1/instances/{instance_id}/drain", role).status == 403
    assert callers.call("GET", f"/v1/instances/{instance_id}", "red").status == 403
    assert api.call("POST", "/v1/instances/i-0000000000000dead/drain").status == 404
    assert api.call("GET", "/v1/instances/i-0000000000000dead").status == 404
    assert api.call("POST", "/v1/instances/not-an-instance/drain").status == 422
    assert instance_id not in api.store.instance_records.drain_requests()
