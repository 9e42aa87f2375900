"""The intake against moto in server mode: real SQS over HTTP, a real store."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from prometheus_client import CollectorRegistry

from framefleet.control_plane import (
    build_intake,
    build_store,
    sqs_client,
)
from framefleet.settings import IntakeConfig
from kernel.clock import SystemClock
from kernel.job_record import AcceptOutcome, Rejection, Submission
from kernel.job_state import JobState
from orchestrator.aws.dead_letters import peek_dead_letters
from orchestrator.intake.metrics import IntakeMetrics
from orchestrator.store.job_store import JobStore
from tests.support.intake import handled, queue_is_empty, running, send, settings_for
from tests.support.jobs import job_dict
from tests.support.local_services import Queues
from tests.support.waits import async_wait_until

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


async def test_valid_duplicate_malformed_and_oversized_messages(
    moto_endpoint: str, queues: Queues, sqs: SQSClient, database_url: str
) -> None:
    good = [job_dict(f"good-{i}") for i in range(5)]
    conflicting = job_dict("good-0", seed=999)
    bodies = [json.dumps(job) for job in good]
    bodies += [
        json.dumps(good[1]),  # duplicate delivery of the same job
        "{not json",
        json.dumps(job_dict("bad-size", width=33)),
        json.dumps([1, 2, 3]),
        json.dumps(job_dict("huge", prompt="x" * 3900, negative_prompt="y" * 3900)),
        json.dumps(conflicting),
    ]
    message_ids = send(sqs, queues.jobs_url, bodies)
    settings = settings_for(moto_endpoint, queues, database_url, max_message_bytes=4096)

    async with running(settings) as plane:
        await async_wait_until(
            lambda: (
                handled(plane.intake_metrics) >= len(bodies)
                and queue_is_empty(sqs, queues.jobs_url)
            )
        )
        metrics = plane.intake_metrics
        assert metrics.outcome("accepted") == 5
        # At least: SQS may deliver any message twice; a second delivery is a no-op.
        assert metrics.outcome("duplicate") >= 1
        assert metrics.outcome("dead_lettered") >= 5
        jobs = plane.store.list_jobs()
        assert sorted(j.job_id for j in jobs) == sorted(j["job_id"] for j in good)
        assert all(j.state is JobState.QUEUED for j in jobs)
        stored_seed = plane.store.get("good-0").spec.seed

    assert queue_is_empty(sqs, queues.jobs_url)
    letters = peek_dead_letters(sqs, queues.dead_letter_url)
    entries = {letter.original_message_id: letter for letter in letters}
    assert len(entries) == 5
    # Standard queues do not keep order: whichever good-0 spec came first won, the other is the
    # conflicting duplicate.
    [loser] = {message_ids[0], message_ids[10]} & set(entries)
    assert entries[loser].reason == "conflicting_duplicate"
    assert stored_seed == (42 if loser == message_ids[10] else 999)
    assert set(entries) == set(message_ids[6:10]) | {loser}
    assert entries[message_ids[6]].reason == "invalid_json"
    assert entries[message_ids[6]].body == "{not json"
    assert entries[message_ids[7]].reason == "invalid_job"
    assert "width" in json.loads(entries[message_ids[7]].errors)[0]
    assert entries[message_ids[8]].reason == "invalid_job"
    assert entries[message_ids[9]].reason == "oversized"
    assert "limit 4096" in entries[message_ids[9]].errors
    assert entries[loser].body == bodies[message_ids.index(loser)]
    # Peeking leaves the entries in place for the operator.
    assert len(peek_dead_letters(sqs, queues.dead_letter_url)) == len(letters)


async def test_a_message_received_but_not_deleted_comes_back_and_is_ingested_once(
    moto_endpoint: str, queues: Queues, sqs: SQSClient, sqlite_url: str
) -> None:
    [message_id] = send(sqs, queues.jobs_url, [json.dumps(job_dict("redelivered"))])
    # A consumer that crashed after receiving: the message is invisible for one second.
    taken = sqs.receive_message(QueueUrl=queues.jobs_url, VisibilityTimeout=1)["Messages"]
    assert [m["MessageId"] for m in taken] == [message_id]

    async with running(settings_for(moto_endpoint, queues, sqlite_url)) as plane:
        await async_wait_until(lambda: plane.intake_metrics.outcome("accepted") == 1)
        assert plane.store.get("redelivered").state is JobState.QUEUED
        assert plane.intake_metrics.outcome("duplicate") == 0
    assert queue_is_empty(sqs, queues.jobs_url)


class HeldStore:
    """A programmable fake around the real store: holds accept_batch until released."""

    def __init__(self, inner: JobStore) -> None:
        self.inner = inner
        self.release = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        self.calls = 0

    def accept_batch(self, submissions: Sequence[Submission]) -> list[AcceptOutcome]:
        self.calls += 1
        asyncio.run_coroutine_threadsafe(self.release.wait(), self.loop).result(timeout=60)
        return self.inner.intake.accept_batch(submissions)

    def record_rejection(self, rejection: Rejection) -> bool:
        return self.inner.intake.record_rejection(rejection)

    def mark_dead_lettered(self, message_id: str) -> None:
        self.inner.intake.mark_dead_lettered(message_id)


async def test_a_slow_batch_keeps_its_messages_invisible(
    moto_endpoint: str, queues: Queues, sqs: SQSClient, sqlite_url: str
) -> None:
    send(sqs, queues.jobs_url, [json.dumps(job_dict("slow"))])
    slow_config = IntakeConfig(concurrency=2, wait_seconds=1, visibility_timeout=2)
    settings = settings_for(moto_endpoint, queues, sqlite_url, intake=slow_config)
    clock = SystemClock()
    store = build_store(settings, clock)
    held = HeldStore(store)
    metrics = IntakeMetrics(CollectorRegistry())
    async with sqs_client(settings) as client:
        intake = build_intake(client, settings, held, clock, metrics)
        stop = asyncio.Event()
        task = asyncio.create_task(intake.run(stop))
        # Three extensions at timeout/2 each: the batch has outlived its original timeout.
        await async_wait_until(
            lambda: metrics.value("framefleet_intake_visibility_extensions_total") >= 3
        )
        held.release.set()
        await async_wait_until(lambda: metrics.outcome("accepted") == 1)
        stop.set()
        await asyncio.wait_for(task, timeout=30)
    store.dispose()
    assert held.calls == 1
    assert metrics.outcome("duplicate") == 0
    assert queue_is_empty(sqs, queues.jobs_url)


@pytest.mark.parametrize("intake_concurrency", [1, 4])
async def test_many_messages_become_exactly_one_job_each(
    moto_endpoint: str, queues: Queues, sqs: SQSClient, sqlite_url: str, intake_concurrency: int
) -> None:
    bodies = [json.dumps(job_dict(f"bulk-{i:03d}")) for i in range(60)]
    send(sqs, queues.jobs_url, bodies + bodies[:10])
    intake = IntakeConfig(concurrency=intake_concurrency, wait_seconds=1, visibility_timeout=30)
    async with running(settings_for(moto_endpoint, queues, sqlite_url, intake=intake)) as plane:
        # SQS delivers at least once (and moto's threaded server occasionally hands one message
        # to two concurrent receivers), so wait for the outcome, not for an exact count.
        await async_wait_until(
            lambda: plane.store.count_jobs() == 60 and queue_is_empty(sqs, queues.jobs_url)
        )
        assert plane.intake_metrics.outcome("accepted") == 60
        assert plane.intake_metrics.outcome("duplicate") >= 10
        assert plane.intake_metrics.outcome("dead_lettered") == 0


async def test_a_job_naming_an_unknown_model_is_dead_lettered_at_the_door(
    moto_endpoint: str, queues: Queues, sqs: SQSClient, database_url: str, tmp_path: Path
) -> None:
    registry = tmp_path / "models.json"
    registry.write_text(
        json.dumps(
            {
                "models": {
                    "wan/tiny-test": {"uri": "s3://no-models/t/", "revision": "r1"},
                    "wan/tiny-i2v": {
                        "uri": "s3://no-models/i/",
                        "revision": "r1",
                        "family": "wan2.2-i2v",
                    },
                }
            }
        )
    )
    gone = job_dict("gone-image", model="wan/tiny-i2v", image="s3://no-models/in/first.png")
    bodies = [
        json.dumps(job_dict("known")),
        json.dumps(job_dict("typo", model="wan/tiny-tset")),
        json.dumps(gone),
    ]
    message_ids = send(sqs, queues.jobs_url, bodies)
    settings = settings_for(moto_endpoint, queues, database_url, model_registry=str(registry))

    async with running(settings) as plane:
        await async_wait_until(
            lambda: (
                handled(plane.intake_metrics) >= len(bodies)
                and queue_is_empty(sqs, queues.jobs_url)
            )
        )
        assert [j.job_id for j in plane.store.list_jobs()] == ["known"]

    letters = {
        letter.original_message_id: letter
        for letter in peek_dead_letters(sqs, queues.dead_letter_url)
    }
    assert letters[message_ids[1]].reason == "unknown_model"
    assert "'wan/tiny-tset' is not in the model registry" in letters[message_ids[1]].errors
    # Its input image is read at the door: not there, so refused before it costs a boot.
    assert letters[message_ids[2]].reason == "bad_input"
    assert "s3://no-models/in/first.png" in letters[message_ids[2]].errors


async def test_an_sqs_jobs_team_comes_from_its_sender(
    moto_endpoint: str, queues: Queues, sqs: SQSClient, database_url: str
) -> None:
    sender = "AIDAIT2UOQQY3AUEKVGXU"  # what moto reports for every message: the test's sender
    bodies = [
        json.dumps(job_dict("mine", tags={"team": "research"})),
        json.dumps(job_dict("claims-another", tags={"team": "marketing"})),
        json.dumps(job_dict("names-none", tags={})),
    ]
    message_ids = send(sqs, queues.jobs_url, bodies)
    intake = IntakeConfig(concurrency=1, wait_seconds=1, sender_teams={sender: ["research"]})
    settings = settings_for(moto_endpoint, queues, database_url, intake=intake)

    async with running(settings) as plane:
        await async_wait_until(
            lambda: (
                handled(plane.intake_metrics) >= len(bodies)
                and queue_is_empty(sqs, queues.jobs_url)
            )
        )
        teams = {j.job_id: j.spec.tags.team for j in plane.store.list_jobs()}
    assert teams == {"mine": "research", "names-none": "research"}
    letters = {
        letter.original_message_id: letter
        for letter in peek_dead_letters(sqs, queues.dead_letter_url)
    }
    assert letters[message_ids[1]].reason == "team_not_allowed"
    assert "claims team 'marketing'" in letters[message_ids[1]].errors
