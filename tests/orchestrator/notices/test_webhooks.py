"""Completion notices to a producer's webhook (issue 49), through the outbox in a real store
to a real HTTP server: delivered signed; retried on a 500 and on no answer, with backoff;
given up as dead after the last try; after a leader dies between sending and marking, the
next leader sends it again under the same key (at least once, never a different notice)."""

from __future__ import annotations

import uuid

import pytest
from framefleet_client.notices import BadSignature, verify
from prometheus_client import CollectorRegistry

from kernel.clock import FakeClock
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.notify_spec import WebhookRule
from orchestrator.notices.service import WEBHOOK, NoticeService, NoticeSettings
from orchestrator.notices.webhook import WebhookSender
from orchestrator.store.job_store import JobStore
from tests.support.jobs import job_dict
from tests.support.webhook_receiver import HANG, webhook_receiver

SECRET = b"whsec-test"
LOOPBACK = WebhookRule.of(["127.0.0.0/8"], allow_http=True)
TRIES = NoticeSettings(max_attempts=3, first_retry_seconds=5, settle_seconds=5)


def _ended(store: JobStore, url: str, state: JobState = JobState.FAILED) -> str:
    job_id = f"noticed-{uuid.uuid4().hex[:8]}"
    job = job_dict(job_id, notify={"webhook": url})
    store.intake.accept_batch([Submission(parse_job(job, now=None), f"m-{job_id}")])
    store.transition(job_id, state, expected_version=1, actor="test", reason="NaN latents")
    return job_id


def _service(
    store: JobStore, sender: WebhookSender, clock: FakeClock, leads: bool = True
) -> NoticeService:
    return NoticeService(
        store.notices, {WEBHOOK: sender}, clock, lambda: leads, CollectorRegistry(), TRIES
    )


async def test_a_notice_is_delivered_signed(store: JobStore, clock: FakeClock) -> None:
    async with webhook_receiver() as receiver, WebhookSender(SECRET, LOOPBACK, clock) as sender:
        service = _service(store, sender, clock)
        await service.step()  # the cursor starts here
        job_id = _ended(store, receiver.url)
        clock.advance(6)
        assert await service.step() == 1
        (got,) = receiver.received
        notice = verify(SECRET, got.body, got.headers, now=lambda: clock.now().timestamp())
        assert (notice["kind"], notice["job_id"], notice["state"]) == (
            "job.failed",
            job_id,
            "failed",
        )
        assert notice["reason"] == "NaN latents"
        assert got.headers["FrameFleet-Notice-Id"] == notice["notice_id"]
        with pytest.raises(BadSignature):
            verify(b"another-secret", got.body, got.headers, now=lambda: clock.now().timestamp())
        (row,) = store.notices.notices(job_id=job_id)
        assert row.state == "delivered"
        assert await service.step() == 0  # nothing twice


async def test_a_500_and_no_answer_are_retried_with_backoff(
    store: JobStore, clock: FakeClock
) -> None:
    async with (
        webhook_receiver() as receiver,
        WebhookSender(SECRET, LOOPBACK, clock, timeout_seconds=0.3) as sender,
    ):
        receiver.answers = [500, HANG]
        service = _service(store, sender, clock)
        await service.step()
        job_id = _ended(store, receiver.url, JobState.CANCELLED)
        clock.advance(6)
        await service.step()
        (row,) = store.notices.notices(job_id=job_id)
        assert (row.state, row.attempts, row.last_error) == ("pending", 1, "HTTP 500")
        assert await service.step() == 0  # not due yet: backoff
        clock.advance(5)
        await service.step()
        (row,) = store.notices.notices(job_id=job_id)
        assert (row.state, row.attempts) == ("pending", 2)
        assert "no answer within" in (row.last_error or "")
        clock.advance(10)
        await service.step()
        assert store.notices.notices(job_id=job_id)[0].state == "delivered"
        assert len(receiver.received) == 3
        assert len({r.headers["FrameFleet-Notice-Id"] for r in receiver.received}) == 1


async def test_a_webhook_that_fails_for_ever_is_given_up_as_dead(
    store: JobStore, clock: FakeClock
) -> None:
    async with webhook_receiver() as receiver, WebhookSender(SECRET, LOOPBACK, clock) as sender:
        receiver.answers = [500] * 10
        service = _service(store, sender, clock)
        await service.step()
        job_id = _ended(store, receiver.url)
        for _ in range(TRIES.max_attempts):
            clock.advance(3600)
            await service.step()
        (row,) = store.notices.notices(job_id=job_id)
        assert (row.state, row.attempts) == ("dead", TRIES.max_attempts)
        clock.advance(3600)
        assert await service.step() == 0
        assert len(receiver.received) == TRIES.max_attempts
        assert store.notices.redeliver(row.id)  # an operator tries it again
        receiver.answers = []
        await service.step()
        assert store.notices.notices(job_id=job_id)[0].state == "delivered"


class DiesBeforeMarking:
    """The leader's store, cut off once it has sent a notice and before it marks it."""

    def __init__(self, store: JobStore) -> None:
        self._store = store.notices
        self.relay, self.due, self.failed = self._store.relay, self._store.due, self._store.failed

    def delivered(self, row_id: int) -> None:
        raise ConnectionError("the leader died")


async def test_after_a_failover_the_next_leader_sends_it_again_under_the_same_key(
    store: JobStore, clock: FakeClock
) -> None:
    async with webhook_receiver() as receiver, WebhookSender(SECRET, LOOPBACK, clock) as sender:
        dying = NoticeService(
            DiesBeforeMarking(store),
            {WEBHOOK: sender},
            clock,
            lambda: True,
            CollectorRegistry(),
            TRIES,
        )
        standby = _service(store, sender, clock, leads=False)
        await dying.step()
        job_ids = {_ended(store, receiver.url) for _ in range(3)}
        clock.advance(6)
        with pytest.raises(ConnectionError):
            await dying.step()
        assert await standby.step() == 0  # not leading
        taken_over = _service(store, sender, clock)
        await taken_over.step()
        keys = [r.headers["FrameFleet-Notice-Id"] for r in receiver.received]
        bodies = {r.headers["FrameFleet-Notice-Id"]: r.body for r in receiver.received}
        assert len(set(keys)) == 3  # every notice, each under its one key
        assert all(keys.count(k) <= 2 for k in keys)
        for received in receiver.received:
            assert bodies[received.headers["FrameFleet-Notice-Id"]] == received.body
        delivered = {n.job_id for n in store.notices.notices(state="delivered")}
        assert job_ids <= delivered
