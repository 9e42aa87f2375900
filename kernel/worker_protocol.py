"""The control-plane <-> worker protocol over MQTT (3.1.1 is enough: nothing here needs MQTT 5).

Topics: `ff/v1/workers/{worker_id}/{hello|heartbeat|events|cmd|status}`. Workers publish hello,
heartbeat, events and status (status is also their last will: offline); the control plane
publishes commands. QoS 1 throughout, so every message may arrive twice: commands are idempotent
by command_id and events by event_id. Every command and job event carries the job's attempt
number, the fencing epoch: the control plane ignores events from an attempt it has replaced.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from kernel.errors import FrameFleetError
from kernel.instance_types import INSTANCE_ID_PATTERN
from kernel.job_spec import JOB_ID_PATTERN, MAX_SPAN_GPUS, MODEL_NAME_PATTERN, JobSpec
from kernel.market import Market
from kernel.outside_text import first_problem, printable
from kernel.precision import Dtype
from kernel.render_stage import RenderStage

PROTOCOL = "framefleet.worker/v1"
TOPIC_PREFIX = "ff/v1/workers"
# No MQTT wildcards or separators, so a worker id is always exactly one topic level.
WORKER_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
MAX_PAYLOAD_BYTES = 512 * 1024
# Bounds counters (steps, attempts) well inside every integer type on the way.
MAX_COUNT = 10**9


class ProtocolError(FrameFleetError):
    """A message that does not follow the protocol; it is logged and ignored."""


class Channel(StrEnum):
    HELLO = "hello"
    HEARTBEAT = "heartbeat"
    EVENTS = "events"
    CMD = "cmd"
    STATUS = "status"


# What workers publish (the control plane subscribes to these; a worker reads only `cmd`).
WORKER_PUBLISHES = (Channel.HELLO, Channel.HEARTBEAT, Channel.EVENTS, Channel.STATUS)


def topic(worker_id: str, channel: Channel) -> str:
    if not re.match(WORKER_ID_PATTERN, worker_id):
        raise ProtocolError(f"invalid worker id {worker_id!r}")
    return f"{TOPIC_PREFIX}/{worker_id}/{channel.value}"


def parse_topic(name: str) -> tuple[str, Channel]:
    parts = name.split("/")
    if len(parts) != 5 or "/".join(parts[:3]) != TOPIC_PREFIX:
        raise ProtocolError(f"not a FrameFleet worker topic: {printable(name, 200)}")
    worker_id, channel = parts[3], parts[4]
    if not re.match(WORKER_ID_PATTERN, worker_id):
        raise ProtocolError(f"invalid worker id in topic {printable(name, 200)}")
    try:
        return worker_id, Channel(channel)
    except ValueError:
        raise ProtocolError(f"unknown channel in topic {printable(name, 200)}") from None


class _Message(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False
    )
    protocol: Literal["framefleet.worker/v1"] = "framefleet.worker/v1"
    worker_id: str = Field(pattern=WORKER_ID_PATTERN)
    sent_at: datetime


class GpuInfo(BaseModel):
    """A slot the worker offers: a whole GPU, a MIG instance of one, or a turn on one that
    several slots share (`physical` names that GPU, `compute_share` the slot's part of it:
    what the ledger charges the slot's jobs of the GPU's price). Left out for a whole GPU,
    as before them."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    index: int = Field(ge=0, le=63)
    family: str = Field(pattern=r"^[a-z0-9]{1,16}$")
    vram_gib: float = Field(gt=0, le=1024)
    physical: int | None = Field(default=None, ge=0, le=63, exclude_if=lambda v: v is None)
    compute_share: float = Field(default=1.0, gt=0, le=1, exclude_if=lambda v: v == 1.0)
    # The slot takes turns on its GPU with the GPU's other slots (`jobs_per_gpu`), unlike a
    # MIG slot, whose compute is its own: a neighbour slows its jobs.
    time_shared: bool = Field(default=False, exclude_if=lambda v: not v)


class Hello(_Message):
    type: Literal["hello"] = "hello"
    # None: a worker on no EC2 instance (a workstation); see orchestrator.control.identity.
    instance_id: Annotated[str, Field(pattern=INSTANCE_ID_PATTERN)] | None = None
    instance_type: str = Field(max_length=32)
    availability_zone: str = Field(max_length=32)
    market: Market
    gpus: tuple[GpuInfo, ...] = Field(min_length=1, max_length=64)
    cached_models: tuple[Annotated[str, Field(max_length=130)], ...] = Field(
        default=(), max_length=256
    )
    agent_version: str = Field(max_length=32)

    @property
    def instance(self) -> str:
        """The instance it speaks for: a worker on no instance stands for itself alone."""
        return self.instance_id or self.worker_id


class JobProgress(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    job_id: str = Field(pattern=JOB_ID_PATTERN)
    attempt: int = Field(ge=1, le=MAX_COUNT)
    gpu_index: int = Field(ge=0, le=63)
    step: int = Field(ge=0, le=MAX_COUNT)
    total_steps: int = Field(ge=1, le=MAX_COUNT)
    dtype: Dtype | None = None  # the dtype its denoising computes in


class WarmModel(BaseModel):
    """A model a GPU holds loaded between jobs: the next job of it starts without a load.
    `stage`: only that stage's components are loaded (a stage of a split render ran last);
    left out for the whole pipeline."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    gpu_index: int = Field(ge=0, le=63)
    model: str = Field(pattern=MODEL_NAME_PATTERN)
    stage: RenderStage | None = Field(default=None, exclude_if=lambda value: value is None)


class GpuHealth(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    index: int = Field(ge=0, le=63)
    utilization_percent: int = Field(ge=0, le=100)
    memory_used_gib: float = Field(ge=0, le=4096)
    temperature_celsius: int = Field(ge=-100, le=300)
    ecc_uncorrected_errors: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    # Critical XID errors the driver reported since the last heartbeat (48: double-bit ECC,
    # 79: fallen off the bus, ...), and NVML's clock throttle reasons (a bit mask).
    xid_errors: tuple[Annotated[int, Field(ge=0, le=10_000)], ...] = Field(
        default=(), max_length=32
    )
    throttle_reasons: int = Field(default=0, ge=0, le=2**64 - 1)


class Heartbeat(_Message):
    type: Literal["heartbeat"] = "heartbeat"
    sequence: int = Field(ge=0, le=2**63 - 1)
    jobs: tuple[JobProgress, ...] = Field(default=(), max_length=64)
    gpus: tuple[GpuHealth, ...] = Field(default=(), max_length=64)
    # The worker's recent job outcomes (finished, failed, preempted), repeated in every beat:
    # an outcome event lost with a broker restart still arrives, and applying one twice is a
    # no-op. Declared below as WorkerEvent.
    recent: tuple[WorkerEvent, ...] = Field(default=(), max_length=64)
    accepting: bool = True
    warm_models: tuple[WarmModel, ...] = Field(default=(), max_length=64)

    @model_validator(mode="after")
    def _own_events_only(self) -> Heartbeat:
        # The topic proves who sent the heartbeat; the events it carries must be the sender's.
        if any(event.worker_id != self.worker_id for event in self.recent):
            raise ValueError("a heartbeat carries only its own worker's events")
        return self


class EventKind(StrEnum):
    STARTED = "started"
    CHECKPOINT_DURABLE = "checkpoint_durable"
    # Stopped at a step boundary after a requested checkpoint (notice, preemption, drain).
    PREEMPTED = "preempted"
    FINISHED = "finished"
    # The attempt finished its stage of a split render: `checkpoint` holds what the next
    # stage starts from (the prompt's embeddings, or the final latents).
    STAGE_DONE = "stage_done"
    FAILED = "failed"
    NOTICE_SEEN = "notice_seen"
    COMMAND_ACK = "command_ack"


class FailureKind(StrEnum):
    """Whose fault a failed attempt was, which decides where (and whether) it runs again."""

    JOB = "job"  # the job's own: it cannot succeed anywhere
    WORKER = "worker"  # the machine's: it runs again elsewhere
    REFUSED = "refused"  # declined before starting (draining, GPU busy)
    PREFLIGHT = "preflight"  # declined: this machine failed its checks for the job
    STALLED = "stalled"  # no step within the watchdog's bound: killed (the machine's fault)


class WorkerEvent(_Message):
    type: Literal["event"] = "event"
    event_id: str = Field(pattern=r"^[A-Za-z0-9-]{8,64}$")
    kind: EventKind
    job_id: str | None = Field(default=None, pattern=JOB_ID_PATTERN)
    attempt: int | None = Field(default=None, ge=1, le=MAX_COUNT)
    step: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    checkpoint: str | None = Field(
        default=None, max_length=1024, description="manifest key, once durable"
    )
    output: str | None = Field(default=None, max_length=1100)
    video_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    # finished: GPU seconds the denoising steps took (what the autoscaler learns its pace from).
    denoise_seconds: float | None = Field(default=None, ge=0, le=10 * 365 * 86400)
    # For the cost ledger. checkpoint_durable and preempted: what writing that checkpoint
    # took; finished, preempted and failed: what loading the model took in this attempt.
    write_seconds: float | None = Field(default=None, ge=0, le=86400)
    model_load_seconds: float | None = Field(default=None, ge=0, le=86400)
    failure_kind: FailureKind | None = None
    gpu_index: int | None = Field(default=None, ge=0, le=63)  # failed: the GPU it ran on
    error: str | None = Field(default=None, max_length=4000)
    notice: str | None = Field(
        default=None, max_length=64, description="instance-action or rebalance"
    )
    command_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9-]{8,64}$")
    # started: how it computes (GPU family, dtype, guidance layout, attention kernel), whether
    # the model was warm, and any note on the resume (for the job's record).
    render: str | None = Field(default=None, max_length=2000)
    # checkpoint_durable and preempted: the GPU family that computed the checkpoint (a job
    # that asked for `exact` resumes only on that family).
    gpu_family: str | None = Field(default=None, pattern=r"^[a-z0-9]{1,16}$")


Heartbeat.model_rebuild()


class Status(_Message):
    type: Literal["status"] = "status"
    online: bool


class CommandKind(StrEnum):
    ASSIGN = "assign"
    CHECKPOINT_NOW = "checkpoint_now"
    CANCEL = "cancel"


class Command(_Message):
    type: Literal["command"] = "command"
    command_id: str = Field(pattern=r"^[A-Za-z0-9-]{8,64}$")
    kind: CommandKind
    job_id: str | None = Field(default=None, pattern=JOB_ID_PATTERN)
    attempt: int | None = Field(default=None, ge=1, le=MAX_COUNT)
    gpu_index: int | None = Field(default=None, ge=0, le=63)
    # A job that spans GPUs (`gpu.count`): its other GPUs on the worker, `gpu_index` its
    # lead. Left out when empty, so a worker of before reads a one-GPU assignment as ever.
    span: tuple[Annotated[int, Field(ge=0, le=63)], ...] = Field(
        default=(), max_length=MAX_SPAN_GPUS - 1, exclude_if=lambda value: not value
    )
    spec: JobSpec | None = None
    resume_from: str | None = Field(default=None, max_length=1024)
    resume_step: int | None = Field(default=None, ge=0, le=MAX_COUNT)  # resume_from's step
    # The worker's pool's mean time between interruptions as measured (spot only): the job
    # checkpoints at the Young/Daly interval for it.
    mtbi_seconds: float | None = Field(default=None, gt=0, le=10 * 365 * 86400)
    # The throughput model's time per step for this job on this GPU's family: the worker's
    # stall watchdog bounds a step by it (kernel.stall) until it has measured its own.
    expected_step_seconds: float | None = Field(default=None, gt=0, le=86400)
    # The stage this attempt runs of a render split into stages; left out for a whole render,
    # so a worker of before reads an unsplit assignment as ever.
    stage: RenderStage | None = Field(default=None, exclude_if=lambda value: value is None)


WorkerMessage = Annotated[Hello | Heartbeat | WorkerEvent | Status, Field(discriminator="type")]


_WORKER_MESSAGE: TypeAdapter[Hello | Heartbeat | WorkerEvent | Status] = TypeAdapter(WorkerMessage)


_EXPECTED = {
    Channel.HELLO: Hello,
    Channel.HEARTBEAT: Heartbeat,
    Channel.EVENTS: WorkerEvent,
    Channel.STATUS: Status,
}


def decode_worker_message(
    topic_name: str, payload: bytes
) -> Hello | Heartbeat | WorkerEvent | Status:
    """Validate a message from a worker. The topic's worker id must match the payload's (the
    broker ACL lets a worker publish only under its own id; this catches a worker that lies)."""
    worker_id, channel = parse_topic(topic_name)
    if channel is Channel.CMD:
        raise ProtocolError("workers do not publish commands")
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise ProtocolError(f"payload of {len(payload)} bytes is over {MAX_PAYLOAD_BYTES}")
    try:
        message = _WORKER_MESSAGE.validate_json(payload, strict=True)
    except ValidationError as error:
        where, what = first_problem(error)
        raise ProtocolError(
            f"malformed {channel.value} message: {where or 'payload'}: {what}"
        ) from None
    if not isinstance(message, _EXPECTED[channel]):
        raise ProtocolError(f"a {message.type} message on the {channel.value} topic")
    if message.worker_id != worker_id:
        raise ProtocolError(
            f"topic names worker {worker_id!r} but the payload says {message.worker_id!r}"
        )
    return message


def decode_command(topic_name: str, payload: bytes) -> Command:
    worker_id, channel = parse_topic(topic_name)
    if channel is not Channel.CMD:
        raise ProtocolError(f"not a command topic: {printable(topic_name, 200)}")
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise ProtocolError(f"command of {len(payload)} bytes is over {MAX_PAYLOAD_BYTES}")
    try:
        command = Command.model_validate_json(payload, strict=True)
    except ValidationError as error:
        raise ProtocolError(f"malformed command: {error.error_count()} problems") from None
    if command.worker_id != worker_id:
        raise ProtocolError("command addressed to another worker")
    return command
