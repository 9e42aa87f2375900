"""The worker side of the protocol, as every worker builds its messages: hello and status kept
by the broker, heartbeats in sequence that repeat the recent outcomes, events with fresh ids,
each one what the control plane's own parser accepts."""

from __future__ import annotations

from datetime import UTC, datetime

from kernel.market import Market
from kernel.worker_protocol import (
    Channel,
    EventKind,
    GpuInfo,
    Heartbeat,
    Hello,
    WorkerEvent,
    decode_worker_message,
    topic,
)
from kernel.worker_side import Machine, WorkerSide

WORKER = "i-0000000000000abcd"
AT = datetime(2026, 12, 5, 12, tzinfo=UTC)
MACHINE = Machine(
    WORKER,
    "g6.xlarge",
    "us-east-1a",
    Market.SPOT,
    (GpuInfo(index=0, family="l4", vram_gib=24),),
    "t",
)


def test_hello_and_status_are_retained_on_their_topics() -> None:
    side = WorkerSide(WORKER)
    hello, status = side.hello(AT, MACHINE), side.status(AT, online=False)

    assert (hello.topic, hello.retain) == (topic(WORKER, Channel.HELLO), True)
    assert (status.topic, status.retain) == (topic(WORKER, Channel.STATUS), True)
    parsed = decode_worker_message(hello.topic, hello.payload.encode())
    assert isinstance(parsed, Hello)
    assert parsed.instance == WORKER


def test_heartbeats_grow_in_sequence_and_repeat_only_the_newest_outcomes() -> None:
    ids = iter(f"event-{n:04d}" for n in range(100))
    side = WorkerSide(WORKER, recent_outcomes=2, event_ids=lambda: next(ids))
    side.event(AT, EventKind.STARTED, job_id="job-a", attempt=1)  # not an outcome
    for job in ("job-a", "job-b", "job-c"):
        side.outcome(AT, EventKind.FINISHED, job_id=job, attempt=1, output=f"s3://o/{job}.mp4")

    sent = [side.heartbeat(AT) for _ in range(2)]
    beats = [decode_worker_message(m.topic, m.payload.encode()) for m in sent]
    assert all(isinstance(beat, Heartbeat) for beat in beats)
    assert [beat.sequence for beat in beats if isinstance(beat, Heartbeat)] == [1, 2]
    second = beats[1]
    assert isinstance(second, Heartbeat)
    assert [event.job_id for event in second.recent] == ["job-b", "job-c"]
    assert [event.event_id for event in second.recent] == ["event-0002", "event-0003"]


def test_an_event_goes_out_as_the_control_plane_reads_it() -> None:
    event, message = WorkerSide(WORKER).event(AT, EventKind.NOTICE_SEEN, notice="rebalance")

    assert message.topic == topic(WORKER, Channel.EVENTS)
    assert decode_worker_message(message.topic, message.payload.encode()) == event
    assert isinstance(event, WorkerEvent)
    assert not message.retain
