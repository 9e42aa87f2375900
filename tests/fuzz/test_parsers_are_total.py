"""Every boundary parser is total: for any input it returns a value or its typed rejection,
and never raises anything else (a RecursionError or a TypeError here would stop a loop)."""

from __future__ import annotations

import base64
import contextlib
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.job_record import Rejection, Submission
from kernel.worker_protocol import (
    Channel,
    Command,
    CommandKind,
    Heartbeat,
    ProtocolError,
    WorkerEvent,
    decode_command,
    decode_worker_message,
    topic,
)
from orchestrator.api.auth import UnknownScope, caller_of, parse_scopes
from orchestrator.api.views import decode_cursor
from orchestrator.intake.decode import decode_message
from orchestrator.intake.ports import ReceivedMessage
from orchestrator.interruptions.events import (
    IgnoredEvent,
    InstanceEvent,
    UnparseableEvent,
    parse_event,
    parse_events,
)
from tests.fuzz.strategies import FUZZ, any_body, mutated
from tests.support.jobs import job_dict
from worker_ami.agent.checkpoint import parse_checkpoint_manifest
from worker_ami.agent.errors import CheckpointRejected, ImdsError, ModelCacheError
from worker_ami.agent.imds import parse_instance_action, parse_rebalance
from worker_ami.agent.model_cache import _parse_manifest

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
VALID_JOB = job_dict("fuzz-job", deadline="2027-01-01T00:00:00Z", gpu={"families": ["l4"]})
VALID_EVENT: dict[str, Any] = {
    "version": "0",
    "id": "12345678-1234-1234-1234-123456789012",
    "detail-type": "EC2 Spot Instance Interruption Warning",
    "source": "aws.ec2",
    "time": "2026-12-03T11:59:00Z",
    "region": "us-east-1",
    "resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-1234567890abcdef0"],
    "detail": {"instance-id": "i-1234567890abcdef0", "instance-action": "terminate"},
}
FINISHED = WorkerEvent(
    worker_id="w1",
    sent_at=NOW,
    event_id="evt-12345678",
    kind="finished",
    job_id="fuzz-job",
    attempt=1,
    output="s3://framefleet-output/videos/fuzz-job.mp4",
)
VALID_HEARTBEAT = Heartbeat(worker_id="w1", sent_at=NOW, sequence=3, recent=(FINISHED,))
VALID_COMMAND = Command(
    worker_id="w1",
    sent_at=NOW,
    command_id="assign-12345678",
    kind=CommandKind.CANCEL,
    job_id="fuzz-job",
    attempt=1,
)


def _job(body: str) -> None:
    message = ReceivedMessage("m-1", "r-1", body, 1)
    assert isinstance(
        decode_message(message, max_bytes=256 * 1024, now=NOW), Submission | Rejection
    )


def _event(body: str) -> None:
    with contextlib.suppress(UnparseableEvent):
        assert isinstance(parse_event(body), InstanceEvent | IgnoredEvent)
    with contextlib.suppress(UnparseableEvent):
        events = parse_events(body)
        assert isinstance(events, IgnoredEvent) or all(isinstance(e, InstanceEvent) for e in events)


def _worker_message(channel: Channel, body: str) -> None:
    with contextlib.suppress(ProtocolError):
        decode_worker_message(topic("w1", channel), body.encode("utf-8", "surrogatepass"))


def _command(body: str) -> None:
    with contextlib.suppress(ProtocolError):
        assert isinstance(decode_command(topic("w1", Channel.CMD), body.encode()), Command)


def _imds(body: str) -> None:
    for parse in (parse_instance_action, parse_rebalance):
        with contextlib.suppress(ImdsError):
            parse(body, NOW)


@FUZZ
@given(st.one_of(any_body(), mutated(VALID_JOB)))
def test_the_job_parser_is_total(body: str) -> None:
    _job(body)


@FUZZ
@given(st.one_of(any_body(), mutated(VALID_EVENT)))
def test_the_eventbridge_parser_is_total(body: str) -> None:
    _event(body)


@FUZZ
@given(
    st.sampled_from([Channel.HELLO, Channel.HEARTBEAT, Channel.EVENTS, Channel.STATUS]),
    st.one_of(
        any_body(),
        mutated(VALID_HEARTBEAT.model_dump(mode="json")),
        mutated(FINISHED.model_dump(mode="json")),
    ),
)
def test_the_worker_message_parser_is_total(channel: Channel, body: str) -> None:
    _worker_message(channel, body)


@FUZZ
@given(st.one_of(any_body(), mutated(VALID_COMMAND.model_dump(mode="json"))))
def test_the_command_parser_is_total(body: str) -> None:
    _command(body)


@FUZZ
@given(
    st.one_of(
        any_body(),
        mutated({"action": "terminate", "time": "2026-12-03T12:02:00Z"}),
        mutated({"noticeTime": "2026-12-03T11:40:00Z"}),
    )
)
def test_the_imds_notice_parsers_are_total(body: str) -> None:
    _imds(body)


@FUZZ
@given(
    st.one_of(
        any_body(),
        mutated(
            {
                "name": "wan/tiny",
                "revision": "r1",
                "files": {"model.safetensors": {"sha256": "0" * 64, "size": 3}},
            }
        ),
    )
)
def test_the_model_manifest_parser_is_total(body: str) -> None:
    with contextlib.suppress(ModelCacheError):
        _parse_manifest(body, "fuzz")


VALID_CHECKPOINT = {
    "schema": "framefleet.checkpoint/v1",
    "identity": {
        "job_id": "j",
        "job_spec_sha256": "a",
        "model": "wan/tiny",
        "model_revision": "r1",
        "pipeline_config_sha256": "b",
        "total_steps": 8,
    },
    "attempt": 1,
    "step": 4,
    "blobs": {"latents.safetensors": {"sha256": "0" * 64, "size": 3}},
    "created_at": "2026-12-03T12:00:00Z",
}


@FUZZ
@given(st.one_of(any_body(), mutated(VALID_CHECKPOINT)))
def test_the_checkpoint_manifest_parser_is_total(body: str) -> None:
    with contextlib.suppress(CheckpointRejected):
        parse_checkpoint_manifest(body.encode("utf-8", "surrogatepass"))


def test_the_reported_poison_messages_are_rejections_not_crashes() -> None:
    """The three inputs that stopped `framefleet serve` in the attack report."""
    nested = "[" * 1000
    message = ReceivedMessage("m-1", "r-1", nested, 1)
    rejection = decode_message(message, max_bytes=256 * 1024, now=NOW)
    assert isinstance(rejection, Rejection)
    assert rejection.reason == "invalid_json"
    for detail in (
        {"instance-id": "i-1234567890abcdef0", "instance-action": ["terminate"]},
        {"instance-id": ["i-1234567890abcdef0"], "instance-action": "terminate"},
        {"instance-id": {"a": 1}, "instance-action": 7},
    ):
        event = {**VALID_EVENT, "detail": detail}
        with pytest.raises(UnparseableEvent, match="without a valid"):
            parse_event(json.dumps(event))


@FUZZ
@given(
    st.one_of(
        st.text(max_size=400),
        st.binary(max_size=300).map(lambda raw: base64.urlsafe_b64encode(raw).decode().rstrip("=")),
    )
)
def test_the_api_cursor_parser_is_total(text: str) -> None:
    cursor = decode_cursor(text)
    assert cursor is None or (cursor.created_at.tzinfo is not None and cursor.job_id)


@FUZZ
@given(st.text(max_size=300))
def test_the_api_token_check_is_total(token: str) -> None:
    class NoTokens:
        def add_token(self, *args: object) -> None: ...

        def token_with_digest(self, sha256: str) -> None:
            assert len(sha256) == 64
            return

    assert caller_of(NoTokens(), token, datetime.now(UTC)) is None


@FUZZ
@given(st.text(max_size=200))
def test_the_scope_parser_is_total(text: str) -> None:
    with contextlib.suppress(UnknownScope):
        assert parse_scopes(text)
