"""Real parts: moto in server mode on 127.0.0.1, SQLite files and PostgreSQL at 127.0.0.1:5432."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest
from moto.server import ThreadedMotoServer

from framefleet.local_ports import free_port
from kernel.clock import FakeClock
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head
from tests.support.aws_actions import LOG_ENV, install
from tests.support.local_services import REGION, Queues, own_postgres_schema
from tests.support.mosquitto import LocalMosquitto

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

# Fixtures several folders share, from the support package (found by name, never imported).
pytest_plugins = ["tests.support.autoscaling", "tests.support.catalogue"]

# moto accepts any credentials; these keep boto from looking for real ones.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
# The CLI's contexts (`framefleet login`): none, whatever the developer logged in to, so that
# the CLI the tests run reads the database unless a test logs in (in a folder of its own).
os.environ["FRAMEFLEET_CLI_CONFIG"] = str(Path(__file__).parent / "no-cli-contexts.json")

# Every AWS call the code makes is recorded with its process role
# (tests/support/aws_actions.py); after the suite, tests/support/iam_check.py holds infra/'s IAM
# policies to it.
AWS_ACTIONS = Path(__file__).parents[1] / ".aws-actions.jsonl"


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller: before any worker starts
        actions = Path(os.environ.get(LOG_ENV, AWS_ACTIONS))  # a run of its own names its own
        actions.write_text("")
        os.environ[LOG_ENV] = str(actions)
        record_dir = str(Path(__file__).parent / "aws_record")
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (record_dir, os.environ.get("PYTHONPATH", "")) if p
        )
    install()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The console's browser tests run in a pytest of their own (`make browser`): Playwright's
    sync API keeps an event loop running in the test process while its browser lives, which
    the asyncio tests beside it cannot share. They are collected only when named."""
    if collection_path == Path(__file__).parent / "orchestrator" / "console":
        return not any("console" in str(arg) for arg in config.args)
    return None


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def sqs(moto_endpoint: str) -> SQSClient:
    return boto3.client("sqs", region_name=REGION, endpoint_url=moto_endpoint)


@pytest.fixture
def queues(sqs: SQSClient) -> Queues:
    suffix = uuid.uuid4().hex[:10]
    jobs = sqs.create_queue(QueueName=f"jobs-{suffix}")["QueueUrl"]
    dead = sqs.create_queue(QueueName=f"jobs-dlq-{suffix}")["QueueUrl"]
    return Queues(jobs_url=jobs, dead_letter_url=dead)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'framefleet.db'}"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A schema of its own per test, so runs never see each other's rows."""
    with own_postgres_schema() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[LocalMosquitto]:
    """A Mosquitto of the test's own, which it may restart."""
    mosquitto = LocalMosquitto(tmp_path, free_port())
    mosquitto.start()
    yield mosquitto
    mosquitto.stop()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(database_url: str, clock: FakeClock) -> Iterator[JobStore]:
    engine = make_engine(database_url)
    upgrade_to_head(engine)
    job_store = JobStore(engine, clock)
    yield job_store
    job_store.dispose()
