"""A finished render's output: the video and its metadata, committed to the job's output prefix
with conditional puts (a duplicate attempt never clobbers a committed output), then the job's
checkpoints deleted."""

from __future__ import annotations

import hashlib
import json

from kernel.clock import Clock
from kernel.job_spec import JobSpec
from worker_ami.agent.checkpoint import CheckpointStore
from worker_ami.agent.model_cache import CachedModel
from worker_ami.agent.object_store import ObjectStore
from worker_ami.agent.recipe import RenderRecipe
from worker_ami.agent.render_session import RenderSession
from worker_ami.agent.report import JobReport, RunStatus
from worker_ami.agent.video import ENCODER_SETTINGS


class VideoOutput:
    def __init__(
        self,
        objects: ObjectStore,
        checkpoints: CheckpointStore,
        clock: Clock,
        load_timeout_s: float,
    ) -> None:
        self._objects = objects
        self._checkpoints = checkpoints
        self._clock = clock
        self._load_timeout_s = load_timeout_s

    async def publish(
        self,
        spec: JobSpec,
        attempt: int,
        session: RenderSession,
        step: int,
        model: CachedModel,
        recipe: RenderRecipe,
        report: JobReport,
    ) -> None:
        started = self._clock.monotonic()
        video, frames = await session.video(spec.fps, self._load_timeout_s)
        report.timings.decode_encode_s = self._clock.monotonic() - started
        digest = hashlib.sha256(video).hexdigest()
        video_key = f"{spec.output_prefix}{spec.job_id}.mp4"
        metadata_key = f"{spec.output_prefix}{spec.job_id}.json"
        metadata = {
            "schema": "framefleet.output/v1",
            "job_id": spec.job_id,
            "attempt": attempt,
            "model": spec.model,
            "model_revision": model.revision,
            "video_sha256": digest,
            "frames": frames,
            "width": spec.width,
            "height": spec.height,
            "fps": spec.fps,
            "steps": spec.steps,
            "seed": spec.seed,
            "encoder": ENCODER_SETTINGS,
            "dtypes": recipe.dtypes.model_dump(mode="json"),
            "gpu_family": recipe.gpu_family,
            "render": recipe.describe(),
            "exact": spec.exact,
            "resumed_from": report.resumed_from,
            "resume_notes": report.resume_notes,
            "tags": spec.tags.model_dump(exclude_none=True),
            "finished_at": self._clock.now().isoformat(),
        }
        started = self._clock.monotonic()
        # Conditional puts: a duplicate attempt can never clobber a committed output.
        committed = await self._objects.put_if_absent(
            spec.output_bucket, video_key, video, "video/mp4"
        )
        if committed:
            await self._objects.put_if_absent(
                spec.output_bucket,
                metadata_key,
                json.dumps(metadata, indent=2).encode(),
                "application/json",
            )
        report.timings.upload_s = self._clock.monotonic() - started
        report.output_already_committed = not committed
        report.output_video = f"s3://{spec.output_bucket}/{video_key}"
        report.output_metadata = f"s3://{spec.output_bucket}/{metadata_key}"
        report.video_sha256 = digest
        report.steps_done = step
        report.status = RunStatus.SUCCEEDED
        await self._checkpoints.delete_all(spec.job_id)
