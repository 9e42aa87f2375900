"""What a notice says and where a webhook may point (pure): the kinds a job's history makes,
and the door's refusal of a webhook that is not public https (no SSRF), unless the deployment
allows the network."""

from __future__ import annotations

import ipaddress
import json
from datetime import UTC, datetime

import pytest

from kernel.errors import JobValidationError
from kernel.job_record import JobEvent
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.notify_spec import WebhookRule
from orchestrator.notices.payload import notice_of
from tests.support.jobs import job_dict

AT = datetime(2026, 12, 7, 12, tzinfo=UTC)
S = JobState


def _event(before: JobState | None, after: JobState, attempt: int = 1) -> JobEvent:
    return JobEvent("shot-1", AT, before, after, 3, attempt, "worker", "why")


def test_each_end_and_asked_for_moves_make_a_notice() -> None:
    spec = parse_job(
        job_dict("shot-1", notify={"webhook": "https://hooks.example.com/ff"}), now=None
    )
    done = notice_of(17, _event(S.RUNNING, S.SUCCEEDED), spec)
    assert done is not None
    assert (done.kind, done.notice_id, done.webhook) == (
        "job.succeeded",
        "17",
        spec.notify and spec.notify.webhook,
    )
    body = json.loads(done.body)
    assert body["schema"] == "framefleet.notice/v1"
    assert body["output"] == "s3://framefleet-output/videos/shot-1.mp4"
    assert body["tags"]["team"] == "research"
    interrupted = notice_of(18, _event(S.CHECKPOINTING, S.PREEMPTED), spec)
    assert interrupted is not None
    assert (interrupted.kind, interrupted.webhook) == ("job.interrupted", None)  # not asked
    resumed = notice_of(19, _event(S.ASSIGNED, S.RUNNING, attempt=2), spec)
    assert resumed is not None
    assert resumed.kind == "job.resumed"
    assert notice_of(20, _event(S.ASSIGNED, S.RUNNING, attempt=1), spec) is None
    assert notice_of(21, _event(S.QUEUED, S.QUEUED), spec) is None  # an operator's change


@pytest.mark.parametrize(
    ("url", "refused"),
    [
        ("https://hooks.example.com/ff", None),
        ("http://hooks.example.com/ff", "must be an https URL"),
        ("https://127.0.0.1/ff", "not a public address"),
        ("https://[::1]/ff", "not a public address"),
        ("https://169.254.169.254/latest/meta-data/", "not a public address"),
        ("https://10.0.3.7/ff", "not a public address"),
        ("https://[::ffff:192.168.1.1]/ff", "not a public address"),
        ("https://localhost:8443/ff", "not a public host"),
        ("https://metadata.google.internal/ff", "not a public host"),
        ("https://user:pw@hooks.example.com/ff", "credentials"),
        ("ftp://hooks.example.com/ff", "must be an https URL"),
        ("https:///ff", "must name a host"),
        ("https://hooks.example.com:99999/ff", "not a URL"),
    ],
)
def test_a_webhook_must_be_public_https(url: str, refused: str | None) -> None:
    problem = WebhookRule().url_refusal(url)
    assert (problem is None) if refused is None else (refused in (problem or ""))


def test_the_door_refuses_a_private_webhook_unless_the_deployment_allows_it() -> None:
    job = job_dict("hooked", notify={"webhook": "http://127.0.0.1:8081/ff"})
    with pytest.raises(JobValidationError) as refused:
        parse_job(job, now=AT)
    assert "notify: " in refused.value.errors[0]
    assert "https" in refused.value.errors[0]
    bench = WebhookRule.of(["127.0.0.0/8"], allow_http=True)
    assert parse_job(job, now=AT, webhooks=bench).notify is not None
    assert parse_job(job, now=None).notify is not None  # a stored job loads as it is
    silent = WebhookRule(sends=False)
    with pytest.raises(JobValidationError, match="sends no webhooks"):
        parse_job(
            job_dict("h2", notify={"webhook": "https://a.example.com/"}), now=AT, webhooks=silent
        )
    assert bench.address_refusal(ipaddress.ip_address("10.1.1.1")) is not None


def test_a_job_without_notify_keeps_its_fingerprint() -> None:
    spec = parse_job(job_dict("plain"), now=None)
    assert "notify" not in json.loads(spec.canonical_json())
