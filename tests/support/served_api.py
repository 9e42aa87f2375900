"""A running `framefleet serve` with its API on, for tests over real HTTP: the process, its
store (a SQLite file the test also opens), tokens of every kind, and a small HTTP client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import urllib3

from framefleet.local_ports import free_port
from kernel.clock import SystemClock
from kernel.fleet_facts import InstanceSeen
from kernel.market import Market
from orchestrator.api.auth import Scope, create_token
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head
from tests.support.local_services import REGION
from tests.support.waits import wait_until

RATE_PER_MINUTE = 120


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: Any  # parsed JSON, or the text

    def json(self) -> dict[str, Any]:
        assert isinstance(self.body, dict), self.body
        return self.body


@dataclass
class ServedApi:
    base: str
    store: JobStore
    tokens: dict[str, str]  # role -> token
    log: Path
    process: subprocess.Popen[bytes]
    http: urllib3.PoolManager
    jobs_url: str = ""  # the SQS jobs queue its intake reads

    def call(
        self,
        method: str,
        path: str,
        role: str | None = "admin",
        *,
        body: Any = None,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        sent = dict(headers or {})
        if role is not None:
            sent["Authorization"] = f"Bearer {self.tokens[role]}"
        if body is not None:
            raw = json.dumps(body).encode()
            sent.setdefault("Content-Type", "application/json")
        reply = self.http.request(
            method,
            self.base + path,
            body=raw,
            headers=sent,
            redirect=False,
            timeout=urllib3.Timeout(total=20),
        )
        text = reply.data.decode()
        try:
            parsed: Any = json.loads(text)
        except ValueError:
            parsed = text
        return Answer(reply.status, {k.lower(): v for k, v in reply.headers.items()}, parsed)


def from_address(api: ServedApi, address: str) -> ServedApi:
    """The same API, called from another loopback address (another client, as it sees it)."""
    http = urllib3.PoolManager(retries=False, source_address=(address, 0))
    return ServedApi(api.base, api.store, api.tokens, api.log, api.process, http)


FAILED_AUTH_PER_MINUTE = 20  # the served API's (the default)
ROLES = {
    "admin": (Scope.ADMIN,),
    "reader": (Scope.READ,),
    "submitter": (Scope.SUBMIT,),
    "canceller": (Scope.CANCEL, Scope.READ),
    "console": (Scope.READ, Scope.SUBMIT, Scope.CANCEL),
    "limited": (Scope.READ,),
    "revoked": (Scope.READ,),
    "streamer": (Scope.READ,),
}
MAX_STREAMS = 2
MAX_CONNECTIONS = 32


def serve_api(
    moto_endpoint: str,
    folder: Path,
    database_url: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> Iterator[ServedApi]:
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=moto_endpoint)
    suffix = uuid.uuid4().hex[:10]
    jobs_url = sqs.create_queue(QueueName=f"api-jobs-{suffix}")["QueueUrl"]
    dead_url = sqs.create_queue(QueueName=f"api-dlq-{suffix}")["QueueUrl"]
    database_url = database_url or f"sqlite:///{folder / 'api.db'}"
    engine = make_engine(database_url)
    upgrade_to_head(engine)
    store = JobStore(engine, SystemClock())
    tokens = {
        role: create_token(store.api_tokens, role, scopes)[1] for role, scopes in ROLES.items()
    }
    store.api_tokens.revoke_token(tokens["revoked"].split("_")[1])
    port = free_port()
    # The model door, as deployed: the tests' model is known, any other is refused.
    registry = folder / "models.json"
    registry.write_text(
        json.dumps({"models": {"wan/tiny-test": {"uri": "s3://no-models/tiny/", "revision": "r1"}}})
    )
    env = {
        **os.environ,
        "FRAMEFLEET_ENDPOINT_URL": moto_endpoint,
        "FRAMEFLEET_JOBS_QUEUE_URL": jobs_url,
        "FRAMEFLEET_DEAD_LETTER_QUEUE_URL": dead_url,
        "FRAMEFLEET_DATABASE_URL": database_url,
        "FRAMEFLEET_INTAKE__WAIT_SECONDS": "1",
        "FRAMEFLEET_API__PORT": str(port),
        "FRAMEFLEET_API__REQUESTS_PER_MINUTE": str(RATE_PER_MINUTE),
        "FRAMEFLEET_API__EVENT_POLL_SECONDS": "0.2",
        "FRAMEFLEET_API__MAX_STREAMS_PER_TOKEN": str(MAX_STREAMS),
        "FRAMEFLEET_API__MAX_CONNECTIONS": str(MAX_CONNECTIONS),
        "FRAMEFLEET_MAX_MESSAGE_BYTES": "4096",
        "FRAMEFLEET_MODEL_REGISTRY": str(registry),
        # Where the workers may write: job_dict's output, and no other bucket.
        "FRAMEFLEET_OUTPUT_PREFIXES": '["s3://framefleet-output/videos/"]',
        **(extra_env or {}),
    }
    log = folder / "serve.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "framefleet", "serve"], env=env, stdout=out, stderr=out
        )
    api = ServedApi(
        f"http://127.0.0.1:{port}",
        store,
        tokens,
        log,
        process,
        urllib3.PoolManager(retries=False),
        jobs_url,
    )

    def answers() -> bool:
        assert process.poll() is None, log.read_text()
        try:
            return api.call("GET", "/openapi.json", None).status == 200
        except urllib3.exceptions.HTTPError:
            return False

    wait_until(answers, timeout=60, what="the API answers")
    try:
        yield api
    finally:
        process.terminate()
        process.wait(timeout=30)
        store.dispose()


def alive_instance(api: ServedApi) -> str:
    """An instance EC2 lists now, as the autoscaler records it (the API may drain it)."""
    instance_id = f"i-{uuid.uuid4().hex[:17]}"
    launched = datetime.now(UTC)
    api.store.cost_facts.record_instances_seen(
        [InstanceSeen(instance_id, "g6.xlarge", "us-east-1a", Market.SPOT, launched, 1, "l4")]
    )
    return instance_id


def dead_letter_queue(api: ServedApi, moto_endpoint: str) -> str:
    """The served API's dead-letter queue (beside its jobs queue)."""
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=moto_endpoint)
    name = api.jobs_url.rsplit("/", 1)[1].replace("api-jobs-", "api-dlq-")
    return sqs.get_queue_url(QueueName=name)["QueueUrl"]
