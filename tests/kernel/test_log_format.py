"""Logs a platform team can ship: with `log_format = "json"` every line is one JSON object with
the job, attempt, worker and instance it is about, each asyncio task keeping its own."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator

import pytest

from kernel.errors import ConfigurationError
from kernel.log_context import bind, current, log_context
from kernel.settings_support import configure_logging
from tests.support.cli import framefleet


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def lines(err: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in err.splitlines() if line.strip()]


@pytest.mark.usefixtures("restore_logging")
def test_each_task_logs_its_own_job_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("INFO", log_format="json")
    log = logging.getLogger("worker_ami.agent.service")

    async def job(job_id: str, attempt: int, go: asyncio.Event, done: asyncio.Event) -> None:
        bind(job_id=job_id, attempt=attempt)
        await go.wait()
        log.info("step done for %s", job_id)
        done.set()

    async def main() -> None:
        bind(worker_id="i-0abc", instance_id="i-0abc")
        first_go, second_go = asyncio.Event(), asyncio.Event()
        first_done, second_done = asyncio.Event(), asyncio.Event()
        tasks = [
            asyncio.create_task(job("a", 1, first_go, first_done)),
            asyncio.create_task(job("b", 2, second_go, second_done)),
        ]
        second_go.set()  # the second logs first: each line still names its own job
        await second_done.wait()
        first_go.set()
        await asyncio.gather(*tasks)
        log.warning('outside text: "quoted"\nand a newline')

    asyncio.run(main())
    b, a, worker = lines(capsys.readouterr().err)
    assert (b["job_id"], b["attempt"], b["message"]) == ("b", 2, "step done for b")
    assert (a["job_id"], a["attempt"], a["worker_id"]) == ("a", 1, "i-0abc")
    assert (a["level"], a["logger"]) == ("INFO", "worker_ami.agent.service")
    assert "time" in a
    assert "job_id" not in worker  # the service's own line: no job
    assert worker["message"] == 'outside text: "quoted"\nand a newline'  # one line, escaped


@pytest.mark.usefixtures("restore_logging")
def test_text_stays_the_default_and_a_block_context_ends_with_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("INFO")
    with log_context(worker_id="w-1", job_id="j-1", attempt=None):
        assert current() == {"worker_id": "w-1", "job_id": "j-1"}
        logging.getLogger("orchestrator.control").info("a line")
    assert current() == {}
    err = capsys.readouterr().err
    assert err.rstrip().endswith("INFO orchestrator.control a line")
    with pytest.raises(TypeError, match="not a log id"):
        bind(password="x")
    with pytest.raises(ConfigurationError, match="log format"):
        configure_logging("INFO", log_format="xml")


def test_a_command_writes_json_lines_when_asked(tmp_path: object) -> None:
    env = {
        "FRAMEFLEET_LOG_FORMAT": "json",
        "FRAMEFLEET_LOG_LEVEL": "DEBUG",
        "FRAMEFLEET_DATABASE_URL": f"sqlite:///{tmp_path}/x.db",
    }
    result = framefleet("jobs", env=env)
    assert result.returncode == 0, result.stderr
    logged = lines(result.stderr)
    assert logged
    assert all({"time", "level", "logger", "message"} <= set(line) for line in logged)
