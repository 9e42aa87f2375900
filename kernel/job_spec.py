"""The job message protocol `framefleet.job/v1`, validated at the boundary with pydantic.

`job_id` is the idempotency key. Identifiers that later become S3 keys or file paths (job id,
model name) are restricted here, once, so no downstream code has to sanitise them.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticSerializationError, to_json

from kernel.errors import JobValidationError
from kernel.input_spec import MAX_ADAPTERS, AdapterRef, s3_object_problem
from kernel.market import GpuFamily
from kernel.notify_spec import NotifySpec, WebhookRule
from kernel.outside_text import printable

JOB_SCHEMA_TAG = "framefleet.job/v1"
DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024

JOB_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$"
MODEL_NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}(/[a-z0-9][a-z0-9_.-]{0,63})?$"
TAG_VALUE_PATTERN = r"^[A-Za-z0-9 _.:/=+@-]{1,128}$"
# Bucket names per the S3 naming rules; the key prefix keeps to characters S3 documents as safe.
S3_URI_RE = re.compile(
    r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<prefix>[A-Za-z0-9!_.*'()/-]{0,900})$"
)


# Text fields may hold tabs and line breaks but no other control characters (NUL included:
# PostgreSQL cannot store it, and terminals act on the rest).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class _Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, str_strip_whitespace=True, allow_inf_nan=False
    )


# The most GPUs one instance has (p4d, p5): a span never crosses instances.
MAX_SPAN_GPUS = 8


class GpuNeeds(_Strict):
    min_vram_gib: float = Field(
        default=15.0,
        ge=1,
        le=1024,
        description="Minimum GPU memory in GiB, as the GPU reports it (a T4 reports 15, an "
        "L40S 44.99)",
    )
    families: tuple[GpuFamily, ...] = Field(
        default=(), max_length=16, description="Allowed GPU families; empty means any"
    )
    # Left out of the canonical form when 1, so the fingerprints of jobs stored before it do
    # not change.
    count: int = Field(
        default=1,
        ge=1,
        le=MAX_SPAN_GPUS,
        description="GPUs of one instance the render spans (context parallelism); each GPU "
        "needs min_vram_gib",
        exclude_if=lambda value: value == 1,
    )


TagValue = Annotated[str, Field(pattern=TAG_VALUE_PATTERN)]


class CostTags(_Strict):
    """Who pays: copied onto every cost line of the job."""

    team: TagValue | None = None
    customer: TagValue | None = None
    project: TagValue | None = None


class JobSpec(_Strict):
    """One video job as a producer submits it (the SQS message body)."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        str_strip_whitespace=True,
        allow_inf_nan=False,
        populate_by_name=True,
        title="FrameFleet job (framefleet.job/v1)",
    )

    schema_tag: Literal["framefleet.job/v1"] = Field(alias="schema")
    job_id: str = Field(pattern=JOB_ID_PATTERN, description="Idempotency key")
    model: str = Field(pattern=MODEL_NAME_PATTERN, description="Name in the model registry")
    prompt: str = Field(min_length=1, max_length=4000)
    negative_prompt: str = Field(default="", max_length=4000)
    width: int = Field(ge=16, le=4096, multiple_of=16)
    height: int = Field(ge=16, le=4096, multiple_of=16)
    num_frames: int = Field(ge=1, le=2049)
    fps: int = Field(default=16, ge=1, le=120)
    steps: int = Field(ge=1, le=1000)
    guidance: float = Field(default=5.0, ge=0, le=50)
    seed: int = Field(ge=0, le=2**63 - 1)
    exact: bool = Field(
        default=False,
        description="Resume only on the GPU family and recipe its checkpoint was made with, so "
        "the video is bit-identical to an uninterrupted render; otherwise it resumes on any GPU "
        "and its record says the video may differ",
    )
    priority: int = Field(default=5, ge=0, le=9, description="0 lowest, 9 most urgent")
    deadline: AwareDatetime | None = Field(default=None, description="Finish by (ISO 8601)")
    gpu: GpuNeeds = Field(default_factory=GpuNeeds)
    output: str = Field(description="s3://bucket/prefix/ where the MP4 and metadata go")
    tags: CostTags = Field(default_factory=CostTags)
    # Left out of the canonical form when unset, so the fingerprints of jobs stored before it
    # (their duplicate detection) do not change.
    max_cost_usd: float | None = Field(
        default=None,
        gt=0,
        le=1_000_000,
        description="The most this job may cost (USD, waste included): no GPU is bought for it "
        "that would cost more, and it is cancelled once its cost reaches this",
        exclude_if=lambda value: value is None,
    )
    image: str | None = Field(
        default=None,
        max_length=1024,
        description="Image-to-video: s3://bucket/key of the first frame (PNG, JPEG or WebP); "
        "only for a model of an image-to-video family",
        exclude_if=lambda value: value is None,
    )
    adapters: tuple[AdapterRef, ...] = Field(
        default=(),
        max_length=MAX_ADAPTERS,
        description="LoRA adapters applied to the model for this job only",
        exclude_if=lambda value: not value,
    )
    notify: NotifySpec | None = Field(
        default=None,
        description="A webhook told when the job ends (and, if asked, of its interruptions)",
        exclude_if=lambda value: value is None,
    )

    @field_validator("notify")
    @classmethod
    def _webhook_allowed(cls, value: NotifySpec | None, info: ValidationInfo) -> NotifySpec | None:
        # At the door only (the caller passes `now`): the deployment's rule, public https by
        # default; a stored job loads whatever the rule has become since.
        context = info.context if isinstance(info.context, dict) else {}
        if value is None or "now" not in context:
            return value
        rule = context.get("webhooks") or WebhookRule()
        problem = rule.url_refusal(value.webhook)
        if problem is not None:
            raise ValueError(f"webhook: {problem}")
        return value

    @field_validator("image")
    @classmethod
    def _image_object(cls, value: str | None) -> str | None:
        problem = None if value is None else s3_object_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("prompt", "negative_prompt")
    @classmethod
    def _no_control_characters(cls, value: str) -> str:
        if _CONTROL.search(value):
            raise ValueError("must not contain control characters other than tab and newline")
        return value

    @field_validator("model")
    @classmethod
    def _no_dot_segments(cls, value: str) -> str:
        if any(part in {".", ".."} or part.endswith(".") for part in value.split("/")):
            raise ValueError("model name segments may not be '.' or '..' or end with '.'")
        return value

    @field_validator("output")
    @classmethod
    def _s3_uri(cls, value: str) -> str:
        match = S3_URI_RE.match(value)
        if match is None:
            raise ValueError("must be s3://bucket/prefix with a valid bucket name")
        if ".." in match["bucket"] or "//" in match["prefix"] or "/../" in f"/{match['prefix']}":
            raise ValueError("must not contain empty or '..' path segments")
        return value

    @field_validator("output")
    @classmethod
    def _output_writable(cls, value: str, info: ValidationInfo) -> str:
        # Only where the caller names the prefixes the workers may write (the deployment's
        # `output_prefixes`): a job that could render but never upload is refused at submit.
        allowed = info.context.get("outputs") if isinstance(info.context, dict) else None
        problem = output_refusal(value, allowed or ())
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("deadline")
    @classmethod
    def _deadline_in_future(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        # Only checked at intake (the caller passes `now`): a stored job whose deadline has
        # since passed must still load.
        now = info.context.get("now") if isinstance(info.context, dict) else None
        if value is not None and now is not None and value <= now:
            raise ValueError(f"deadline {value.isoformat()} is not in the future")
        return value

    @property
    def output_bucket(self) -> str:
        match = S3_URI_RE.match(self.output)
        assert match is not None  # guaranteed by the validator
        return match["bucket"]

    @property
    def output_prefix(self) -> str:
        match = S3_URI_RE.match(self.output)
        assert match is not None
        return match["prefix"]

    def attempt_log(self, attempt: int) -> tuple[str, str]:
        """(bucket, key) of an attempt's log lines, beside the video (worker_ami/agent/job_logs)."""
        return attempt_log(self.output, self.job_id, attempt)

    def canonical_json(self) -> str:
        """A stable serialisation: equal specs give equal bytes (used for duplicate detection)."""
        return self.model_dump_json(by_alias=True, exclude_none=False)

    def fingerprint(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()


def output_refusal(output: str, prefixes: tuple[str, ...] | list[str]) -> str | None:
    """Why a job's output may not go to `output`: not under any of `prefixes`, the places the
    workers may write (none given: anywhere)."""
    if not prefixes or any(output.startswith(prefix) for prefix in prefixes):
        return None
    return "the workers may not write there: it must lie under " + " or ".join(sorted(prefixes))


def format_validation_errors(error: ValidationError) -> tuple[str, ...]:
    """'loc: message' lines without echoing the input values back (they may be large). Field
    names may come from the input (an unexpected key), so they are made printable."""
    lines = []
    for item in error.errors(include_input=False, include_url=False):
        loc = ".".join(printable(str(part), 64) for part in item["loc"]) or "(message)"
        lines.append(f"{loc}: {item['msg']}")
    return tuple(lines)


def parse_job(
    data: str | bytes | dict[str, Any],
    *,
    now: datetime | None,
    outputs: tuple[str, ...] = (),
    webhooks: WebhookRule | None = None,
) -> JobSpec:
    """Validate one job strictly (no coercion: `true` is not a priority, `"30"` is not a
    number of steps); raises JobValidationError with one line per problem.

    Total: any input gives a JobSpec or a JobValidationError. The JSON parser refuses nesting
    deeper than its recursion limit and numbers out of range instead of raising, and every
    field has a size bound. `now` enables the deadline-in-the-future check (pass it for new
    submissions). `outputs`: the prefixes a new job's output must lie under (the places the
    workers may write); none: anywhere. `webhooks`: where a new job's `notify` may point (with
    `now`; the default: public https only).
    """
    context: dict[str, Any] = {"now": now} if now is not None else {}
    if outputs:
        context["outputs"] = outputs
    if webhooks is not None:
        context["webhooks"] = webhooks
    try:
        text = to_json(data) if isinstance(data, dict) else data
    except PydanticSerializationError as error:
        raise JobValidationError((f"(message): not representable as JSON: {error}",)) from None
    try:
        return JobSpec.model_validate_json(text, strict=True, context=context)
    except ValidationError as error:
        raise JobValidationError(format_validation_errors(error)) from None


def job_json_schema() -> dict[str, Any]:
    schema = JobSpec.model_json_schema(by_alias=True)
    schema["$id"] = "https://framefleet.dev/schemas/framefleet.job.v1.json"
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def attempt_log(output: str, job_id: str, attempt: int) -> tuple[str, str]:
    """(bucket, key) of a job's attempt's log, from its `s3://bucket/prefix/` output."""
    match = S3_URI_RE.match(output)
    if match is None:
        raise ValueError(f"not an S3 output: {output[:100]}")
    return match["bucket"], f"{match['prefix']}{job_id}.attempt-{attempt}.log"
