"""What the worker tests render with: the tiny model's name, the buckets, a runner, a video job, and
reading back what was written to S3."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel.clock import Clock, SystemClock
from kernel.job_spec import JobSpec, parse_job
from kernel.model_registry import ModelEntry
from kernel.precision import Precision
from tests.support.jobs import job_dict
from worker_ami.agent.checkpoint import CheckpointStore
from worker_ami.agent.model_cache import ModelCache, ModelRegistry, publish_model
from worker_ami.agent.object_store import S3ObjectStore
from worker_ami.agent.recipe import recipe_for
from worker_ami.agent.render_limits import RenderLimits
from worker_ami.agent.render_process import ChildRenders
from worker_ami.agent.runner import JobRunner, RunnerSettings
from worker_ami.agent.settings import WorkerSettings

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

MODEL = "wan/tiny-test"
# What a CPU worker renders with: the product's own recipe there (fp32, two passes).
CPU_RECIPE = recipe_for(Precision(), "cpu", "cpu")
REVISION = "r1"


@dataclass(frozen=True)
class Buckets:
    models: str
    checkpoints: str
    outputs: str


def make_runner(
    objects: S3ObjectStore,
    registry: ModelRegistry,
    settings: WorkerSettings,
    clock: Clock | None = None,
    **runner_settings: Any,
) -> JobRunner:
    clock = clock or SystemClock()
    bucket = settings.require_checkpoint_bucket()
    return JobRunner(
        objects=objects,
        checkpoints=CheckpointStore(objects, bucket),
        models=ModelCache(objects, settings.cache_dir, 10**10, clock),
        registry=registry,
        clock=clock,
        settings=RunnerSettings(
            device="cpu", **({"mean_time_between_interruptions_s": float("inf")} | runner_settings)
        ),
    )


def process_runner(
    objects: S3ObjectStore,
    registry: ModelRegistry,
    settings: WorkerSettings,
    processes: Path | None,
    gpu_family: str = "cpu",
) -> JobRunner:
    """A runner as a worker builds it, rendering in processes under `processes` (one thread
    each), or in its own thread where None; `gpu_family`: the GPU family it says it has."""
    renders = ChildRenders("cpu", RenderLimits(threads=1), processes) if processes else None
    return JobRunner(
        objects,
        CheckpointStore(objects, settings.require_checkpoint_bucket()),
        ModelCache(objects, settings.cache_dir, 10**10, SystemClock()),
        registry,
        SystemClock(),
        RunnerSettings(mean_time_between_interruptions_s=float("inf"), gpu_family=gpu_family),
        renders,
    )


async def published(
    objects: S3ObjectStore, folder: Path, buckets: Buckets, name: str
) -> ModelRegistry:
    """The model in `folder` published as MODEL under `name` in the models bucket."""
    uri = f"s3://{buckets.models}/{name}/"
    await publish_model(objects, folder, uri, MODEL, REVISION)
    return ModelRegistry(models={MODEL: ModelEntry(uri=uri, revision=REVISION)})


def video_job(buckets: Buckets, job_id: str, **overrides: Any) -> JobSpec:
    fields: dict[str, Any] = {
        "model": MODEL,
        "steps": 8,
        "output": f"s3://{buckets.outputs}/{job_id}/",
    }
    job = job_dict(job_id, **(fields | overrides))
    return parse_job(job, now=None)


def read_object(s3: S3Client, bucket: str, key: str) -> bytes:
    return s3.get_object(Bucket=bucket, Key=key)["Body"].read()
