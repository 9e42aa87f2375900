"""An operator's session from a laptop (issue 49): the CLI in API mode against a served
control plane on PostgreSQL, never opening the database itself. Log in (the token kept 0600),
list jobs, read a job's log, drain an instance, redrive a dead letter, create a token and
revoke it; and the exit statuses a script reads: 3 not found, 4 refused, 5 unreachable."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from framefleet.local_ports import free_port
from kernel.job_record import DrainKind
from tests.support.fleet_history import job_with_log
from tests.support.jobs import job_dict
from tests.support.local_services import REGION, own_postgres_schema
from tests.support.served_api import ServedApi, alive_instance, dead_letter_queue, serve_api
from tests.support.waits import wait_until

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def served(moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApi]:
    with own_postgres_schema() as postgres_url:
        folder = tmp_path_factory.mktemp("serve")
        yield from serve_api(moto_endpoint, folder, database_url=postgres_url)


class Cli:
    """`framefleet` as an operator runs it: its own config folder, no database settings."""

    def __init__(self, home: Path) -> None:
        self.config = home / "config" / "framefleet" / "contexts.json"
        kept = ("PATH", "HOME", "LANG", "PYTHONPATH", "VIRTUAL_ENV")
        self.env = {k: v for k, v in os.environ.items() if k in kept}
        self.env |= {"XDG_CONFIG_HOME": str(home / "config"), "COLUMNS": "200"}

    def run(self, *args: str, stdin: str = "", status: int = 0) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "framefleet", *args],
            input=stdin,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == status, (args, done.returncode, done.stdout, done.stderr)
        return done.stdout if status == 0 else done.stderr

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json"))


def test_an_operators_session_goes_through_the_api(
    served: ServedApi, moto_endpoint: str, tmp_path: Path
) -> None:
    cli = Cli(tmp_path / "laptop")
    cli.run(
        "login", served.base, "--context", "prod", "--token-stdin", stdin=served.tokens["admin"]
    )
    assert stat.S_IMODE(cli.config.stat().st_mode) == 0o600
    assert served.tokens["admin"] not in cli.run("contexts")

    job_id = f"op-{uuid.uuid4().hex[:8]}"
    job_with_log(served.store, moto_endpoint, job_id, "INFO step 1 of 30\n\x1b[31mred\n")
    listed = [json.loads(line) for line in cli.run("jobs", "-o", "json").splitlines()]
    assert job_id in {job["job_id"] for job in listed}
    assert cli.json("job", job_id)["job_id"] == job_id
    assert cli.json("logs", job_id)["attempts"][0]["log"].startswith("INFO step 1")
    shown = cli.run("logs", job_id)
    assert "INFO step 1 of 30" in shown
    assert "\x1b" not in shown  # a worker's escape codes are shown, not obeyed

    instance_id = alive_instance(served)
    assert instance_id in {i["instance_id"] for i in cli.json("instances")["instances"]}
    cli.run("drain", instance_id)
    assert served.store.instance_records.drain_requests()[instance_id].kind is DrainKind.REBALANCE

    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=moto_endpoint)
    redriven = f"redriven-{uuid.uuid4().hex[:8]}"
    letter = sqs.send_message(
        QueueUrl=dead_letter_queue(served, moto_endpoint),
        MessageBody=json.dumps(job_dict(redriven)),
    )["MessageId"]
    assert letter in {m["message_id"] for m in cli.json("dead-letters")["letters"]}
    cli.run("dead-letters", "redrive", letter)
    wait_until(lambda: served.store.find(redriven) is not None, what="the redriven job stored")
    cli.run("dead-letters", "redrive", letter, status=3)  # gone now

    assert len(cli.json("history")["points"]) == 48
    assert "total_usd" in cli.json("report", "--period", "day")
    assert "groups" in cli.json("report", "--by", "model")
    assert "quarantined" in cli.json("gpus")
    focus = tmp_path / "focus.csv"
    cli.run("costs", "export", "--output", str(focus))
    assert focus.read_text().startswith("AvailabilityZone,")

    made = cli.run("tokens", "create", "--name", "ci-render", "--scopes", "submit", "--team", "red")
    token = made.strip().splitlines()[-1]
    listed_tokens = cli.json("tokens", "list")["tokens"]
    (ci,) = [t for t in listed_tokens if t["name"] == "ci-render"]
    assert ci["teams"] == ["red"]
    assert served.call("GET", "/v1/jobs", None, headers=_bearer(token)).status == 403
    cli.run("tokens", "revoke", ci["token_id"])
    assert served.call("GET", "/v1/jobs", None, headers=_bearer(token)).status == 401


def test_exit_statuses_tell_what_went_wrong(served: ServedApi, tmp_path: Path) -> None:
    cli = Cli(tmp_path / "laptop")
    cli.run("drain", "i-0123456789abcdef0", status=2)  # an API command, and no login
    assert not cli.config.exists()
    cli.run("login", served.base, "--token-stdin", stdin="ff_not_a_token", status=4)
    assert not cli.config.exists()  # a token the API refused is not kept
    reader = served.tokens["reader"]
    cli.run("login", served.base, "--context", "ops", "--token-stdin", stdin=reader)
    assert "no-such-job" in cli.run("job", "no-such-job", status=3)
    cli.run("drain", "i-0123456789abcdef0", status=4)  # a reader's token: forbidden
    cli.run("retry", status=2)  # usage: no job id
    closed = f"http://127.0.0.1:{free_port()}"
    cli.run("login", closed, "--context", "away", "--token-stdin", stdin="x", status=5)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
