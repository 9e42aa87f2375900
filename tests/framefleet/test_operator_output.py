"""What reaches the operator: outside text printed as plain text, logs without secrets,
settings mistakes as one line, metrics on loopback unless asked."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from framefleet.local_ports import free_port
from framefleet.settings import Settings
from kernel.outside_text import printable
from kernel.settings_support import configure_logging
from tests.support.cli import dead_letters_shown, framefleet
from tests.support.local_services import Queues

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


def test_dead_letters_print_markup_and_escapes_as_plain_text(
    moto_endpoint: str, queues: Queues, sqs: SQSClient
) -> None:
    body = "\x1b[2J\x07[link=https://evil.example]click[/link]"
    errors = '["[blink]e\\u001b[0m"]'
    result = dead_letters_shown(
        sqs, moto_endpoint, queues, body, "[bold]x[/bold]", errors, FORCE_COLOR="1"
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "[link=https://evil.example]" in out  # shown, not turned into a link
    assert "\x1b]8;" not in out  # no hyperlink escape sequence
    assert "[bold]x[/bold]" in out
    assert "\\x1b[2J\\x07" in out  # the escape sequence and the bell, shown as text
    assert "\x07" not in out
    assert "\x1b[2J" not in out


def test_printable_escapes_control_characters_and_cuts() -> None:
    assert printable("a\nb\x1b[31m") == "a\\nb\\x1b[31m"
    assert printable("x" * 10, 4) == "xxxx..."


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name in ("orchestrator", "botocore", "alembic"):
        logging.getLogger(name).setLevel(logging.NOTSET)


@pytest.mark.usefixtures("restore_logging")
def test_debug_applies_to_framefleet_loggers_only_unless_asked() -> None:
    configure_logging("DEBUG")
    assert logging.getLogger("orchestrator.intake.loop").isEnabledFor(logging.DEBUG)
    assert not logging.getLogger("botocore.credentials").isEnabledFor(logging.DEBUG)
    assert not logging.getLogger("botocore.endpoint").isEnabledFor(logging.DEBUG)
    configure_logging("DEBUG", libraries_level="DEBUG")
    assert logging.getLogger("botocore.endpoint").isEnabledFor(logging.DEBUG)


def test_debug_logs_of_a_command_hold_no_access_key(tmp_path: object) -> None:
    key_id = "AKIAFRAMEFLEETSECRET1"
    env = {
        "FRAMEFLEET_LOG_LEVEL": "DEBUG",
        "FRAMEFLEET_DATABASE_URL": f"sqlite:///{tmp_path}/x.db",
        "AWS_ACCESS_KEY_ID": key_id,
    }
    result = framefleet("jobs", env=env)
    assert result.returncode == 0, result.stderr
    assert key_id not in result.stderr + result.stdout


@pytest.mark.parametrize("url", ["nope", "postgresql://user:hunter2@[bad", "mystery://x"])
def test_a_malformed_database_url_is_one_line(url: str) -> None:
    result = framefleet("jobs", env={"FRAMEFLEET_DATABASE_URL": url})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("framefleet: error: ")
    assert "hunter2" not in result.stderr


def test_metrics_bind_loopback_by_default() -> None:
    assert Settings().metrics_host == "127.0.0.1"


def test_a_metrics_port_in_use_is_one_line(
    moto_endpoint: str, queues: Queues, tmp_path: object
) -> None:
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        result = framefleet(
            "serve",
            env={
                "FRAMEFLEET_ENDPOINT_URL": moto_endpoint,
                "FRAMEFLEET_JOBS_QUEUE_URL": queues.jobs_url,
                "FRAMEFLEET_DEAD_LETTER_QUEUE_URL": queues.dead_letter_url,
                "FRAMEFLEET_DATABASE_URL": f"sqlite:///{tmp_path}/x.db",
                "FRAMEFLEET_METRICS_PORT": str(port),
            },
        )
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert errors == [
        f"framefleet: error: cannot serve metrics on 127.0.0.1:{port}: Address already in use"
    ], result.stderr
    assert "Traceback" not in result.stderr


def test_a_database_password_given_apart_joins_the_url_and_stays_out_of_reprs() -> None:
    settings = Settings.model_validate(
        {
            "database_url": "postgresql+psycopg://framefleet@db.internal:5432/framefleet",
            "database_password": "p@ss/word",
        }
    )
    assert settings.store_url() == (
        "postgresql+psycopg://framefleet:p%40ss%2Fword@db.internal:5432/framefleet"
    )
    assert "p@ss" not in repr(settings)
