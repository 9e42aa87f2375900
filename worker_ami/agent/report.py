"""What the agent reports about one run of one job (printed as JSON; sent over MQTT later)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from kernel.worker_protocol import FailureKind
from worker_ami.agent.recipe import RenderRecipe


class RunStatus(StrEnum):
    SUCCEEDED = "succeeded"
    PREEMPTED = "preempted"  # stopped on notice with a durable checkpoint
    STAGE_DONE = "stage_done"  # its stage of a split render done, the next one's checkpoint durable
    FAILED = "failed"


class Timings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model_load_s: float = 0.0
    denoise_s: float = 0.0
    checkpoint_writes_s: list[float] = Field(default_factory=list)
    decode_encode_s: float = 0.0
    upload_s: float = 0.0


class JobReport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_tag: str = Field(default="framefleet.report/v1", alias="schema")
    job_id: str
    attempt: int
    status: RunStatus
    steps_done: int
    total_steps: int
    resumed_from: str | None = None
    resume_notes: list[str] = Field(default_factory=list)
    checkpoint: str | None = Field(
        default=None, description="manifest key when preempted or its stage is done"
    )
    checkpoints_written: list[str] = Field(default_factory=list)
    notices: list[str] = Field(default_factory=list)
    output_video: str | None = None
    output_metadata: str | None = None
    output_already_committed: bool = False
    video_sha256: str | None = None
    recipe: RenderRecipe | None = None  # how it computed (dtypes, family, ...)
    model_loaded: bool = True  # False: the model was already warm on the GPU
    failure_kind: FailureKind | None = None
    error: str | None = None
    timings: Timings = Field(default_factory=Timings)
