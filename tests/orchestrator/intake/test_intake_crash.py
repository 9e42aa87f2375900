"""SIGKILL the intake process in the middle of its batches, restart it, and count: every sent
message must have become exactly one job or one dead-letter entry."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from kernel.clock import SystemClock
from orchestrator.aws.dead_letters import peek_dead_letters
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head
from tests.support.intake import queue_is_empty, send
from tests.support.jobs import job_dict
from tests.support.local_services import Queues
from tests.support.waits import wait_until

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

GOOD, BAD = 240, 24


def start_intake(env: dict[str, str], log_file: Path) -> subprocess.Popen[bytes]:
    with log_file.open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "framefleet", "serve"], env=env, stdout=log, stderr=log
        )


def in_flight(sqs: SQSClient, url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessagesNotVisible"])


def test_sigkill_mid_batch_loses_nothing_and_duplicates_nothing(
    moto_endpoint: str, queues: Queues, sqs: SQSClient, tmp_path: Path
) -> None:
    good = [json.dumps(job_dict(f"crash-{i:04d}")) for i in range(GOOD)]
    bad = [f'{{"job_id": "broken-{i}", ' for i in range(BAD)]
    bodies = good + bad
    message_ids = send(sqs, queues.jobs_url, bodies)
    good_ids, bad_ids = set(message_ids[:GOOD]), set(message_ids[GOOD:])

    database_url = f"sqlite:///{tmp_path / 'crash.db'}"
    engine = make_engine(database_url)
    upgrade_to_head(engine)
    store = JobStore(engine, SystemClock())
    env = {
        **os.environ,
        "FRAMEFLEET_ENDPOINT_URL": moto_endpoint,
        "FRAMEFLEET_JOBS_QUEUE_URL": queues.jobs_url,
        "FRAMEFLEET_DEAD_LETTER_QUEUE_URL": queues.dead_letter_url,
        "FRAMEFLEET_DATABASE_URL": database_url,
        "FRAMEFLEET_INTAKE__CONCURRENCY": "4",
        "FRAMEFLEET_INTAKE__WAIT_SECONDS": "1",
        "FRAMEFLEET_INTAKE__VISIBILITY_TIMEOUT": "2",
    }
    log_file = tmp_path / "intake.log"

    def progress() -> int:
        return store.count_jobs() + len(store.intake.rejections())

    def reached(threshold: int) -> bool:
        return progress() >= threshold

    caught_in_flight = []
    for threshold in (GOOD // 5, 2 * GOOD // 5, 3 * GOOD // 5):
        process = start_intake(env, log_file)
        wait_until(partial(reached, threshold), what=f"{threshold} messages handled")
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        caught_in_flight.append(in_flight(sqs, queues.jobs_url))

    # At least one kill landed while a batch was received but not yet deleted.
    assert max(caught_in_flight) > 0, caught_in_flight

    process = start_intake(env, log_file)
    wait_until(
        lambda: progress() == GOOD + BAD and queue_is_empty(sqs, queues.jobs_url),
        timeout=60,
        what="all messages handled after restart",
    )
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    assert "stopped cleanly" in log_file.read_text()

    jobs = store.list_jobs(limit=GOOD * 2)
    assert len(jobs) == GOOD
    assert {job.job_id for job in jobs} == {f"crash-{i:04d}" for i in range(GOOD)}
    assert {store.get(job.job_id).spec.prompt for job in jobs} == {job_dict()["prompt"]}
    rejections = store.intake.rejections()
    assert {r.message_id for r in rejections} == bad_ids
    assert not good_ids & {r.message_id for r in rejections}
    letters = peek_dead_letters(sqs, queues.dead_letter_url)
    assert {letter.original_message_id for letter in letters} == bad_ids
    assert all(letter.reason == "invalid_json" for letter in letters)
    store.dispose()
