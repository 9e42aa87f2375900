from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from kernel.errors import JobValidationError
from kernel.job_record import Rejection
from kernel.job_spec import JOB_SCHEMA_TAG, job_json_schema, parse_job
from orchestrator.client import submit_job
from orchestrator.intake.decode import decode_message
from orchestrator.intake.ports import ReceivedMessage
from tests.support.jobs import job_dict
from tests.support.paths import DOCS

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
SCHEMA_FILE = DOCS / "job.schema.json"


def test_valid_job_round_trips_through_its_canonical_json() -> None:
    spec = parse_job(job_dict("clip-1"), now=NOW)
    assert spec.schema_tag == JOB_SCHEMA_TAG
    again = parse_job(spec.canonical_json(), now=NOW)
    assert again == spec
    assert again.fingerprint() == spec.fingerprint()
    assert spec.output_bucket == "framefleet-output"
    assert spec.output_prefix == "videos/"


@pytest.mark.parametrize(
    ("overrides", "complaint"),
    [
        ({"schema": "framefleet.job/v2"}, "schema"),
        ({"width": 30}, "width"),
        ({"height": 8192}, "height"),
        ({"steps": 0}, "steps"),
        ({"num_frames": 0}, "num_frames"),
        ({"prompt": ""}, "prompt"),
        ({"prompt": "x" * 4001}, "prompt"),
        ({"seed": -1}, "seed"),
        ({"priority": 10}, "priority"),
        ({"job_id": "../etc/passwd"}, "job_id"),
        ({"job_id": "a/b"}, "job_id"),
        ({"model": "wan/../secrets"}, "model"),
        ({"model": "Wan/Upper"}, "model"),
        ({"output": "https://bucket/x"}, "output"),
        ({"output": "s3://Bad_Bucket/x"}, "output"),
        ({"output": "s3://bucket/a/../b"}, "output"),
        ({"gpu": {"min_vram_gib": 0}}, "gpu.min_vram_gib"),
        ({"gpu": {"families": ["tpu"]}}, "gpu.families"),
        ({"tags": {"team": "a\nb"}}, "tags.team"),
        ({"unexpected": 1}, "unexpected"),
    ],
)
def test_out_of_bounds_fields_are_rejected_with_their_location(
    overrides: dict[str, object], complaint: str
) -> None:
    with pytest.raises(JobValidationError) as caught:
        parse_job(job_dict(**overrides), now=NOW)
    assert any(line.startswith(complaint) for line in caught.value.errors), caught.value.errors


def test_a_deadline_must_be_in_the_future_at_submission() -> None:
    past = (NOW - timedelta(seconds=1)).isoformat()
    with pytest.raises(JobValidationError, match="not in the future"):
        parse_job(job_dict(deadline=past), now=NOW)
    future = (NOW + timedelta(hours=2)).isoformat()
    assert parse_job(job_dict(deadline=future), now=NOW).deadline == NOW + timedelta(hours=2)


def test_a_stored_job_whose_deadline_passed_still_loads() -> None:
    spec = parse_job(job_dict(deadline=(NOW + timedelta(minutes=1)).isoformat()), now=NOW)
    assert parse_job(spec.canonical_json(), now=None).deadline == spec.deadline


def test_a_naive_deadline_is_rejected() -> None:
    with pytest.raises(JobValidationError, match="deadline"):
        parse_job(job_dict(deadline="2030-01-01T00:00:00"), now=NOW)


def test_errors_do_not_echo_the_input_back() -> None:
    with pytest.raises(JobValidationError) as caught:
        parse_job(job_dict(prompt="p" * 5000), now=NOW)
    assert "ppppp" not in str(caught.value)


def test_checked_in_json_schema_is_current() -> None:
    generated = json.dumps(job_json_schema(), indent=2, sort_keys=True) + "\n"
    assert SCHEMA_FILE.read_text() == generated, "run `make schema` and commit docs/job.schema.json"


def test_an_output_must_lie_where_the_workers_may_write_when_that_is_configured() -> None:
    writable = ("s3://framefleet-data/videos/",)
    inside = job_dict(output="s3://framefleet-data/videos/team-a/")
    assert parse_job(inside, now=None, outputs=writable).output == inside["output"]
    for outside in ("s3://framefleet-data/checkpoints/", "s3://other-bucket/videos/"):
        with pytest.raises(JobValidationError) as refused:
            parse_job(job_dict(output=outside), now=None, outputs=writable)
        (line,) = refused.value.errors
        assert line == (
            "output: Value error, the workers may not write there: it must lie under "
            "s3://framefleet-data/videos/"
        )
    # Not configured: anywhere (the check is the deployment's, from Terraform).
    assert parse_job(job_dict(output="s3://other-bucket/videos/"), now=None).output


def test_the_client_refuses_a_parsed_job_with_an_output_elsewhere() -> None:
    spec = parse_job(job_dict(output="s3://other-bucket/videos/"), now=None)
    with pytest.raises(JobValidationError, match="workers may not write"):
        submit_job(spec, queue_url="http://127.0.0.1:1/never", output_prefixes=("s3://b-1/v/",))


def test_the_sqs_intake_dead_letters_an_output_elsewhere_with_the_reason() -> None:
    body = json.dumps(job_dict(output="s3://other-bucket/videos/"))
    decided = decode_message(
        ReceivedMessage("m-1", "r-1", body, 1),
        max_bytes=262144,
        now=datetime.now(UTC),
        outputs=("s3://framefleet-data/videos/",),
    )
    assert isinstance(decided, Rejection)
    assert decided.reason == "invalid_job"
    assert decided.errors[0].startswith("output: ")


def test_gpu_count_is_left_out_of_the_canonical_form_when_one_and_bounded_by_an_instance() -> None:
    one = parse_job(job_dict("clip-1"), now=NOW)
    assert "count" not in json.loads(one.canonical_json())["gpu"]
    spanned = parse_job(job_dict("clip-1", gpu={"min_vram_gib": 24, "count": 4}), now=NOW)
    assert spanned.gpu.count == 4
    assert json.loads(spanned.canonical_json())["gpu"]["count"] == 4
    assert spanned.fingerprint() != one.fingerprint()
    for count in (0, 9, 2.5):
        with pytest.raises(JobValidationError):
            parse_job(job_dict("clip-1", gpu={"count": count}), now=NOW)
