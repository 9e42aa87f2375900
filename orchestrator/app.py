"""Composition root: builds the control plane's object graph from settings.

No module-level state anywhere else: tests build the same graph with their own settings.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import aioboto3
from aiobotocore.config import AioConfig
from prometheus_client import CollectorRegistry

from orchestrator.aws.sqs import SqsDeadLetterQueue, SqsJobQueue
from orchestrator.config import Settings
from orchestrator.domain.clock import Clock, SystemClock
from orchestrator.intake.loop import IntakeLoop
from orchestrator.intake.metrics import IntakeMetrics
from orchestrator.intake.ports import JobSink
from orchestrator.store.engine import make_engine, redact_url
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head

if TYPE_CHECKING:
    from types_aiobotocore_sqs import SQSClient

log = logging.getLogger(__name__)


def boto_config() -> AioConfig:
    return AioConfig(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=64)


def build_store(settings: Settings, clock: Clock) -> JobStore:
    url = settings.database_url.get_secret_value()
    engine = make_engine(url)
    if settings.auto_migrate:
        upgrade_to_head(engine)
    log.debug("store at %s", redact_url(url))
    return JobStore(engine, clock)


def build_intake(
    sqs: SQSClient, settings: Settings, sink: JobSink, clock: Clock, metrics: IntakeMetrics
) -> IntakeLoop:
    jobs_url, dead_letter_url = settings.require_queues()
    return IntakeLoop(
        queue=SqsJobQueue(sqs, jobs_url),
        dead_letters=SqsDeadLetterQueue(sqs, dead_letter_url),
        sink=sink,
        clock=clock,
        metrics=metrics,
        settings=settings.intake.to_settings(settings.max_message_bytes),
        source_queue=jobs_url,
    )


@asynccontextmanager
async def sqs_client(settings: Settings) -> AsyncIterator[SQSClient]:
    session = aioboto3.Session(region_name=settings.region)
    async with session.client(
        "sqs", endpoint_url=settings.endpoint_url, config=boto_config()
    ) as client:
        yield client


@dataclass
class ControlPlane:
    store: JobStore
    intake: IntakeLoop
    intake_metrics: IntakeMetrics
    registry: CollectorRegistry

    async def run(self, stop: asyncio.Event) -> None:
        await self.intake.run(stop)


@asynccontextmanager
async def control_plane(
    settings: Settings, clock: Clock | None = None
) -> AsyncIterator[ControlPlane]:
    clock = clock or SystemClock()
    settings.require_queues()
    store = build_store(settings, clock)
    registry = CollectorRegistry()
    metrics = IntakeMetrics(registry)
    try:
        async with sqs_client(settings) as sqs:
            intake = build_intake(sqs, settings, store, clock, metrics)
            yield ControlPlane(
                store=store, intake=intake, intake_metrics=metrics, registry=registry
            )
    finally:
        store.dispose()
