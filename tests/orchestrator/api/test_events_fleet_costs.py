"""The event stream (job moves as they happen, resumable by Last-Event-ID; launches and
interruptions from the fleet), the fleet, the money, and the published OpenAPI document."""

from __future__ import annotations

import json
import uuid
from collections.abc import Generator, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import urllib3

from kernel.fleet_facts import InstanceSeen, PriceSeen
from kernel.market import Market
from orchestrator.api.app import openapi_document
from tests.support.jobs import job_dict
from tests.support.paths import DOCS
from tests.support.served_api import MAX_STREAMS, ServedApi
from tests.support.waits import wait_until

DOCUMENT = DOCS / "openapi.json"


def events(
    api: ServedApi, headers: dict[str, str] | None = None, role: str = "reader"
) -> Generator[tuple[str, Any, str]]:
    """(event, data, id) as the stream sends them; returns once the stream is connected (it
    has read where it starts), so what the test does next is in it."""
    reply = api.http.request(
        "GET",
        api.base + "/v1/events",
        preload_content=False,
        headers={"Authorization": f"Bearer {api.tokens[role]}", **(headers or {})},
        timeout=urllib3.Timeout(connect=5, read=20),
    )
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("text/event-stream")
    lines = (raw.decode().rstrip("\n") for raw in reply)
    assert any(line == ": connected" for line in lines)
    return _parsed(reply, lines)


def _parsed(
    reply: urllib3.BaseHTTPResponse, lines: Iterator[str]
) -> Generator[tuple[str, Any, str]]:
    kind, data, event_id = "", "", ""
    try:
        for line in lines:
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
            elif line.startswith("id: "):
                event_id = line[4:]
            elif line == "" and kind:
                yield kind, json.loads(data), event_id
                kind, data, event_id = "", "", ""
    finally:
        reply.close()  # an endless stream: its connection is not reused


def test_the_stream_sends_job_moves_and_resumes_after_the_last_id(api: ServedApi) -> None:
    job_id = f"live-{uuid.uuid4().hex[:10]}"
    stream = events(api)
    # The stream starts at the newest move; this job's acceptance comes after it.
    api.call("POST", "/v1/jobs", "submitter", body=job_dict(job_id))
    kind, data, first_id = next(e for e in stream if e[1].get("job_id") == job_id)
    assert (kind, data["to_state"], data["actor"]) == ("job", "queued", "api:submitter")
    assert data["reason"].startswith("accepted from API request ")
    api.call("POST", f"/v1/jobs/{job_id}/cancel", "canceller")
    stream.close()
    resumed = events(api, {"Last-Event-ID": first_id})
    kind, data, later_id = next(e for e in resumed if e[1].get("job_id") == job_id)
    resumed.close()
    assert (data["from_state"], data["to_state"]) == ("queued", "cancelled")
    assert int(later_id) > int(first_id)


def test_a_token_holds_only_a_few_streams_at_once(api: ServedApi) -> None:
    held = [events(api, role="streamer") for _ in range(MAX_STREAMS)]
    refused = api.call("GET", "/v1/events", "streamer")
    assert refused.status == 429
    assert refused.headers["retry-after"] == "5"
    held.pop().close()  # the server sees the disconnect and lets the token in again

    def opens() -> bool:
        try:
            held.append(events(api, role="streamer"))
        except AssertionError:
            return False
        return True

    wait_until(opens, timeout=10, what="a stream after one closed")
    for stream in held:
        stream.close()


def test_the_stream_reports_launches_and_interruptions(api: ServedApi) -> None:
    instance_id = f"i-{uuid.uuid4().hex[:17]}"
    now = datetime.now(UTC)
    stream = events(api)
    api.store.cost_facts.record_instances_seen(
        [InstanceSeen(instance_id, "p3.2xlarge", "us-east-1a", Market.SPOT, now, 1, "v100")]
    )
    kind, data, _ = next(e for e in stream if e[1].get("instance_id") == instance_id)
    assert (kind, data["market"], data["availability_zone"]) == ("launch", "spot", "us-east-1a")
    api.store.instance_records.record_gone(
        instance_id, "EC2 Spot Instance Interruption Warning", ended=True
    )
    kind, data, _ = next(e for e in stream if e[1].get("instance_id") == instance_id)
    stream.close()
    assert kind == "interruption"
    assert "Interruption" in data["reason"]


def test_the_fleet_shows_instances_with_price_and_jobs(api: ServedApi) -> None:
    instance_id = f"i-{uuid.uuid4().hex[:17]}"
    now = datetime.now(UTC)
    then = now - timedelta(minutes=5)
    api.store.cost_facts.record_instances_seen(
        # Launched five minutes ago: billed some cents by now (the API's money is in cents).
        [InstanceSeen(instance_id, "g5.xlarge", "us-east-1c", Market.ON_DEMAND, then, 1, "a10g")]
    )
    api.store.cost_facts.record_prices(
        [
            PriceSeen(
                "g5.xlarge",
                "us-east-1c",
                Market.ON_DEMAND,
                now - timedelta(minutes=5),
                Decimal("1.006"),
            )
        ]
    )
    fleet = api.call("GET", "/v1/fleet", "reader").json()
    shown = next(i for i in fleet["instances"] if i["instance_id"] == instance_id)
    assert shown["usd_per_hour"] == "1.006000"
    assert (shown["market"], shown["state"], shown["jobs"]) == ("on-demand", "booting", [])
    assert Decimal(fleet["usd_per_hour"]) >= Decimal("1.006")
    costs = api.call("GET", "/v1/costs?period=day", "reader").json()
    assert Decimal(costs["total_usd"]) > 0  # the instance has been billed since it launched
    assert set(costs) >= {"waste_usd", "savings_usd", "by_category", "by_tag"}
    assert (
        api.call(
            "GET", "/v1/costs?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", "reader"
        ).status
        == 400
    )


def test_the_published_openapi_document_is_current() -> None:
    current = json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"
    assert DOCUMENT.read_text() == current, "regenerate it: make schema"
    paths = json.loads(current)["paths"]
    assert {"/v1/jobs", "/v1/jobs/{job_id}/cancel", "/v1/events", "/v1/costs"} <= set(paths)
