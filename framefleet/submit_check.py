"""`framefleet submit` checks a job at the model door before it sends it, where the registry is
configured: an unknown model or an impossible GPU need is one line on stderr, not a message the
control plane would dead-letter later."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from framefleet.control_plane import s3_client
from framefleet.settings import Settings
from kernel.clock import SystemClock
from kernel.errors import JobValidationError
from kernel.job_spec import parse_job
from orchestrator.aws.model_registry import S3RegistryReader
from orchestrator.intake.model_door import DoorRefusal, ModelDoor


async def check_at_the_door(settings: Settings, job: dict[str, Any]) -> None:
    """JobValidationError with the door's reason; nothing when it admits the job, or when the
    job is invalid anyway (`submit_job` says why)."""
    if not settings.model_registry:
        return
    try:
        spec = parse_job(
            job,
            now=datetime.now(UTC),
            outputs=settings.output_prefixes,
            webhooks=settings.notices.rule(),
        )
    except JobValidationError:
        return
    async with s3_client(settings) as s3:
        door = ModelDoor(S3RegistryReader(s3, settings.model_registry), SystemClock())
        await door.refresh()
        admitted = door.admit(spec)
        if not isinstance(admitted, DoorRefusal):
            admitted = await door.inputs_refusal(spec) or spec
    if isinstance(admitted, DoorRefusal):
        raise JobValidationError((f"{admitted.reason}: {admitted.error}",))
