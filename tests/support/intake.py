"""The intake against moto's SQS: a control plane's settings for a queue, the plane running, and
messages sent and counted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from framefleet.control_plane import (
    ControlPlane,
    control_plane,
)
from framefleet.settings import IntakeConfig, Settings
from kernel.clock import SystemClock
from orchestrator.intake.metrics import IntakeMetrics
from tests.support.local_services import Queues

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


def settings_for(
    moto_endpoint: str, queues: Queues, database_url: str, **overrides: object
) -> Settings:
    intake = IntakeConfig(concurrency=2, wait_seconds=1, visibility_timeout=30)
    values: dict[str, object] = {
        "endpoint_url": moto_endpoint,
        "jobs_queue_url": queues.jobs_url,
        "dead_letter_queue_url": queues.dead_letter_url,
        "database_url": database_url,
        "intake": intake,
    }
    values.update(overrides)
    return Settings.model_validate(values)


@asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[ControlPlane]:
    stop = asyncio.Event()
    async with control_plane(settings, SystemClock()) as plane:
        task = asyncio.create_task(plane.run(stop))
        try:
            yield plane
        finally:
            stop.set()
            await asyncio.wait_for(task, timeout=30)


def handled(metrics: IntakeMetrics) -> int:
    return sum(metrics.outcome(o) for o in ("accepted", "duplicate", "dead_lettered"))


def queue_is_empty(sqs: SQSClient, url: str) -> bool:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return attributes["ApproximateNumberOfMessages"] == "0" and (
        attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
    )


def send(sqs: SQSClient, url: str, bodies: Sequence[str]) -> list[str]:
    return [sqs.send_message(QueueUrl=url, MessageBody=body)["MessageId"] for body in bodies]
