"""`framefleet` as a user runs it: a subprocess with settings from the environment or a file."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import boto3

from kernel.clock import SystemClock
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head
from tests.support.cli import dead_letters_shown, framefleet
from tests.support.jobs import job_dict
from tests.support.local_services import REGION, Queues
from tests.support.paths import DOCS

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


def test_submit_from_a_file_with_flag_overrides(
    moto_endpoint: str, queues: Queues, sqs: SQSClient, tmp_path: Path
) -> None:
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps(job_dict("from-file")))
    config = tmp_path / "framefleet.toml"
    config.write_text(
        f'endpoint_url = "{moto_endpoint}"\n'
        f'jobs_queue_url = "{queues.jobs_url}"\n'
        f'dead_letter_queue_url = "{queues.dead_letter_url}"\n'
    )
    result = framefleet("--config", str(config), "submit", "--file", str(job_file), "--seed", "7")
    assert result.returncode == 0, result.stderr
    assert "submitted" in result.stdout
    [message] = sqs.receive_message(QueueUrl=queues.jobs_url)["Messages"]
    sent = json.loads(message["Body"])
    assert (sent["job_id"], sent["seed"]) == ("from-file", 7)


def test_submit_refuses_an_invalid_job_with_one_line(
    moto_endpoint: str, queues: Queues, sqs: SQSClient
) -> None:
    env = {
        "FRAMEFLEET_ENDPOINT_URL": moto_endpoint,
        "FRAMEFLEET_JOBS_QUEUE_URL": queues.jobs_url,
        "FRAMEFLEET_DEAD_LETTER_QUEUE_URL": queues.dead_letter_url,
    }
    result = framefleet(
        "submit",
        "--job-id",
        "x",
        "--model",
        "wan/tiny",
        "--prompt",
        "p",
        "--width",
        "33",
        "--height",
        "32",
        "--num-frames",
        "9",
        "--steps",
        "4",
        "--seed",
        "1",
        "--output",
        "s3://bucket-ok/x/",
        env=env,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("framefleet: error: invalid job: width")
    assert "Traceback" not in result.stderr
    assert "Messages" not in sqs.receive_message(QueueUrl=queues.jobs_url)


def test_missing_configuration_is_one_clear_line(tmp_path: Path) -> None:
    result = framefleet("serve", env={"FRAMEFLEET_JOBS_QUEUE_URL": ""}, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "framefleet: error: set FRAMEFLEET_JOBS_QUEUE_URL and FRAMEFLEET_DEAD_LETTER_QUEUE_URL "
        "(or jobs_queue_url / dead_letter_queue_url in the config file)"
    ]
    missing = framefleet("--config", str(tmp_path / "nope.toml"), "jobs")
    assert missing.returncode == 2
    assert "does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_jobs_table_and_job_detail(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'cli.db'}"
    engine = make_engine(database_url)
    upgrade_to_head(engine)
    store = JobStore(engine, SystemClock())
    for job_id in ("alpha", "beta"):
        store.intake.accept_batch(
            [Submission(parse_job(job_dict(job_id), now=None), f"m-{job_id}")]
        )
    store.transition("beta", JobState.CANCELLED, expected_version=1, actor="ops", reason="typo")
    store.dispose()
    env = {"FRAMEFLEET_DATABASE_URL": database_url}

    listing = framefleet("jobs", env=env)
    assert listing.returncode == 0, listing.stderr
    assert "alpha" in listing.stdout
    assert "beta" in listing.stdout
    queued = framefleet("jobs", "--state", "queued", env=env)
    assert "alpha" in queued.stdout
    assert "beta" not in queued.stdout

    detail = framefleet("job", "beta", env=env)
    assert detail.returncode == 0, detail.stderr
    assert "state=cancelled" in detail.stdout
    assert "typo" in detail.stdout
    assert '"prompt"' in detail.stdout

    unknown = framefleet("job", "gamma", env=env)
    assert unknown.returncode == 3  # not found (README, "The command line")
    assert unknown.stderr.strip() == "framefleet: error: job 'gamma' not found"


def test_database_password_never_reaches_the_logs(tmp_path: Path) -> None:
    secret = "hunter2-s3cret"
    env = {
        "FRAMEFLEET_DATABASE_URL": f"postgresql+psycopg://app:{secret}@127.0.0.1:1/none",
        "FRAMEFLEET_LOG_LEVEL": "DEBUG",
    }
    result = framefleet("jobs", env=env)
    assert result.returncode == 2
    assert "database error" in result.stderr
    assert secret not in result.stderr + result.stdout


def test_schema_command_prints_the_published_schema() -> None:
    result = framefleet("schema")
    assert result.returncode == 0
    published = (DOCS / "job.schema.json").read_text()
    assert json.loads(result.stdout) == json.loads(published)


def test_dead_letters_command_shows_reasons(
    moto_endpoint: str, queues: Queues, sqs: SQSClient
) -> None:
    result = dead_letters_shown(
        sqs, moto_endpoint, queues, "{broken", "invalid_json", '["not JSON: oops"]'
    )
    assert result.returncode == 0, result.stderr
    assert "invalid_json" in result.stdout
    assert "not JSON: oops" in result.stdout


def test_tokens_are_created_listed_and_revoked(tmp_path: Path) -> None:
    env = {"FRAMEFLEET_DATABASE_URL": f"sqlite:///{tmp_path / 'tokens.db'}"}
    created = framefleet("tokens", "create", "--name", "ci", "--scopes", "submit,read", env=env)
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip().splitlines()[-1]
    token_id = token.split("_")[1]
    assert token.startswith(f"ff_{token_id}_")
    listing = framefleet("tokens", "list", env=env)
    assert token_id in listing.stdout
    assert "submit,read" in listing.stdout
    assert token not in listing.stdout  # only its id: the store keeps a digest
    assert framefleet("tokens", "revoke", token_id, env=env).returncode == 0
    again = framefleet("tokens", "revoke", token_id, env=env)
    assert again.returncode == 2
    assert "no live token" in again.stderr
    bad = framefleet("tokens", "create", "--name", "x", "--scopes", "root", env=env)
    assert bad.returncode == 2
    assert "scopes are a comma-separated list of" in bad.stderr


def test_a_first_token_goes_into_a_secret_not_onto_the_screen(
    tmp_path: Path, moto_endpoint: str
) -> None:
    secrets = boto3.client("secretsmanager", region_name=REGION, endpoint_url=moto_endpoint)
    arn = secrets.create_secret(Name=f"ff-{uuid.uuid4().hex[:8]}/api-first-token")["ARN"]
    env = {
        "FRAMEFLEET_DATABASE_URL": f"sqlite:///{tmp_path / 'tokens.db'}",
        "FRAMEFLEET_ENDPOINT_URL": moto_endpoint,
        "FRAMEFLEET_REGION": REGION,
    }
    command = ["tokens", "create", "--name", "platform", "--scopes", "admin"]
    created = framefleet(*command, "--into-secret", arn, env=env)
    assert created.returncode == 0, created.stderr
    token = secrets.get_secret_value(SecretId=arn)["SecretString"]
    assert token.startswith("ff_")
    assert token not in created.stdout + created.stderr
    assert f"written to {arn}" in created.stdout
    missing = framefleet("tokens", "create", "--name", "x", "--into-secret", arn + "-gone", env=env)
    assert missing.returncode == 2
    store = JobStore(make_engine(env["FRAMEFLEET_DATABASE_URL"]), SystemClock())
    revoked = {t.name: t.revoked_at is not None for t in store.api_tokens.tokens()}
    store.dispose()
    assert revoked == {"platform": False, "x": True}  # the unwritten token is no one's


def test_jobs_in_a_pipe_prints_whole_ids(tmp_path: Path) -> None:
    """A table folds a long id to the terminal's width; a script needs it whole."""
    database_url = f"sqlite:///{tmp_path / 'cli.db'}"
    engine = make_engine(database_url)
    upgrade_to_head(engine)
    store = JobStore(engine, SystemClock())
    long_id = "render-" + "x" * 90
    store.intake.accept_batch([Submission(parse_job(job_dict(long_id), now=None), "m-long")])
    store.dispose()
    env = {"FRAMEFLEET_DATABASE_URL": database_url, "COLUMNS": "60"}

    plain = framefleet("jobs", env=env)  # stdout is a pipe here
    assert plain.returncode == 0, plain.stderr
    header, line = plain.stdout.splitlines()
    assert header.split("\t")[0] == "job_id"
    assert line.split("\t")[:2] == [long_id, "queued"]
    as_json = framefleet("jobs", "--output", "json", env=env)
    assert json.loads(as_json.stdout)["job_id"] == long_id
    table = framefleet("jobs", "--output", "table", env=env)
    assert "jobs (1)" in table.stdout
