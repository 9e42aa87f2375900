"""What the API answers, as pydantic models: they validate what goes out and are the OpenAPI
document's schemas. Money is a decimal string (USD): finance's numbers are never floats."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from kernel.job_spec import JobSpec
from kernel.job_state import JobState
from kernel.render_stage import RenderStage


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True, from_attributes=True)


class DeadlineRisk(StrEnum):
    NONE = "none"  # no deadline, or the job ended without one to meet
    ON_TRACK = "on_track"  # the estimated finish is before the deadline
    UNKNOWN = "unknown"  # no estimate yet, and the deadline is not near
    AT_RISK = "at_risk"  # the estimate is past the deadline, or it is near without one
    LATE = "late"  # unfinished, and the deadline has passed
    MET = "met"
    MISSED = "missed"


class Tags(_Out):
    team: str | None = None
    customer: str | None = None
    project: str | None = None


class JobSummary(_Out):
    job_id: str
    state: JobState
    priority: int
    model: str
    deadline: datetime | None
    deadline_risk: DeadlineRisk
    attempt: int
    created_at: datetime
    updated_at: datetime
    tags: Tags


class JobPage(_Out):
    jobs: list[JobSummary]
    next_cursor: str | None = Field(description="pass as `cursor` for the next page; null: last")


class AttemptView(_Out):
    attempt: int
    worker_id: str | None
    gpu_index: int | None
    started_at: datetime
    ended_at: datetime | None
    outcome: str | None
    checkpoints: int


class HistoryLine(_Out):
    at: datetime
    from_state: JobState | None
    to_state: JobState
    attempt: int
    actor: str
    reason: str


class ProgressView(_Out):
    attempt: int
    step: int
    total_steps: int
    reported_at: datetime
    seconds_per_step: float | None = Field(description="measured over this attempt so far")


class CostView(_Out):
    total_usd: str
    waste_usd: str = Field(description="lost work, idle and draining time")
    by_category: dict[str, str]


class JobDetail(_Out):
    job_id: str
    state: JobState
    spec: JobSpec
    attempt: int
    attempts: list[AttemptView]
    history: list[HistoryLine]
    last_checkpoint: str | None
    checkpoint_step: int
    stage: RenderStage | None = Field(
        default=None,
        description="the stage its next (or current) attempt runs, for a render split into "
        "stages (encode, denoise, decode); null: it renders whole",
    )
    waiting_for: str | None = Field(
        default=None, description="why a queued job waits, where the scheduler knows (a quota)"
    )
    progress: ProgressView | None
    estimated_finish: datetime | None
    deadline_risk: DeadlineRisk
    cost: CostView | None = Field(description="so far, across all attempts; null: never ran")


class OutputLink(_Out):
    url: str
    expires_at: datetime


class FleetInstance(_Out):
    instance_id: str
    instance_type: str
    availability_zone: str
    market: str
    usd_per_hour: str | None
    state: str = Field(description="booting, running or draining")
    launched_at: datetime
    gpus: int
    jobs: list[str]


class FleetView(_Out):
    instances: list[FleetInstance]
    usd_per_hour: str
    interruptions_24h: int


class TagCost(_Out):
    tag: str
    value: str
    usd: str


class CostsView(_Out):
    since: datetime
    until: datetime
    total_usd: str
    waste_usd: str
    on_demand_equivalent_usd: str
    savings_usd: str
    by_category: dict[str, str]
    by_tag: list[TagCost]
    incomplete: list[str]


class Problem(_Out):
    """Every error: what went wrong, and for a refused job, each field's problem."""

    detail: str
    errors: list[str] = []
