"""Composition root: builds the control plane's object graph from settings.

No module-level state anywhere else: tests build the same graph with their own settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

import aioboto3
import boto3
from aiobotocore.config import AioConfig
from prometheus_client import CollectorRegistry

from framefleet.health_server import HealthServer, ReadinessCheck
from framefleet.notices_wiring import notice_service
from framefleet.outage_report import report_outages
from framefleet.settings import Settings
from kernel.clock import Clock, SystemClock
from kernel.mqtt_link import LinkSettings, MqttLink
from kernel.outage import LoopRun, keep_running
from orchestrator.aws.model_registry import S3RegistryReader
from orchestrator.aws.ses import SesSender
from orchestrator.aws.sqs import SqsDeadLetterQueue, SqsQueue, queue_depth
from orchestrator.control.budgets import MessageBudget
from orchestrator.control.job_events import RetryPolicy
from orchestrator.control.leadership import Leadership
from orchestrator.control.plane_metrics import FleetMoney, PlaneGauges, PlaneMetrics
from orchestrator.control.progress import ProgressRecorder
from orchestrator.control.reception import WORKER_TOPICS
from orchestrator.control.refusals import RefusedMessages
from orchestrator.control.service import ControlPlaneService
from orchestrator.control.settings import ControlSettings
from orchestrator.costs.job_cost import job_cost_so_far
from orchestrator.costs.ledger import CostLedger
from orchestrator.costs.reporting import Reporter, ReportSettings
from orchestrator.intake.loop import IntakeLoop
from orchestrator.intake.metrics import IntakeMetrics
from orchestrator.intake.model_door import ModelDoor
from orchestrator.intake.ports import JobSink
from orchestrator.interruptions.loop import InterruptionMetrics, InterruptionsLoop
from orchestrator.notices.service import NoticeService
from orchestrator.store.engine import make_engine, redact_url
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client
    from types_aiobotocore_sqs import SQSClient

    from framefleet.api_server import ApiServer

log = logging.getLogger(__name__)


class _Loop(Protocol):
    async def run(self, stop: asyncio.Event) -> None: ...


def boto_config() -> AioConfig:
    return AioConfig(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=64)


def build_store(settings: Settings, clock: Clock) -> JobStore:
    url = settings.store_url()
    engine = make_engine(url)
    if settings.auto_migrate:
        upgrade_to_head(engine)
    log.debug("store at %s", redact_url(url))
    return JobStore(engine, clock)


def build_intake(
    sqs: SQSClient,
    settings: Settings,
    sink: JobSink,
    clock: Clock,
    metrics: IntakeMetrics,
    door: ModelDoor | None = None,
) -> IntakeLoop:
    jobs_url, dead_letter_url = settings.require_queues()
    return IntakeLoop(
        queue=SqsQueue(sqs, jobs_url),
        dead_letters=SqsDeadLetterQueue(sqs, dead_letter_url),
        sink=sink,
        clock=clock,
        metrics=metrics,
        settings=settings.intake.to_settings(
            settings.max_message_bytes, settings.output_prefixes, settings.notices.rule()
        ),
        source_queue=jobs_url,
        door=door,
    )


def sqs_client(settings: Settings) -> AbstractAsyncContextManager[SQSClient]:
    session = aioboto3.Session(region_name=settings.region)
    return session.client("sqs", endpoint_url=settings.endpoint_url, config=boto_config())


def s3_client(settings: Settings) -> AbstractAsyncContextManager[S3Client]:
    session = aioboto3.Session(region_name=settings.region)
    return session.client("s3", endpoint_url=settings.endpoint_url, config=boto_config())


def replica_id() -> str:
    """This process among the control plane's replicas (its lease holder name and MQTT client
    id): short, since MQTT 3.1.1 promises client ids of 23 characters only."""
    return f"ff-cp-{uuid.uuid4().hex[:12]}"


def build_control_service(
    settings: Settings,
    store: JobStore,
    clock: Clock,
    refusals: RefusedMessages,
    leadership: Leadership | None = None,
) -> ControlPlaneService:
    mqtt, control = settings.mqtt, settings.control
    assert mqtt.host is not None
    link = LinkSettings(
        host=mqtt.host,
        port=mqtt.port,
        client_id=mqtt.client_id or (leadership.holder if leadership else replica_id()),
        username=mqtt.username,
        password=mqtt.password.get_secret_value() if mqtt.password else None,
        tls=mqtt.tls,
        ca_file=str(mqtt.ca_file) if mqtt.ca_file else None,
    )
    ledger = CostLedger(store.cost_facts, clock, settings.costs.ledger())
    plane_settings = control.scheduling.apply(
        ControlSettings(
            tick_seconds=control.tick_seconds,
            resend_after=timedelta(seconds=control.resend_after_seconds),
            suspect_after=timedelta(seconds=control.suspect_after_seconds),
            lost_after=timedelta(seconds=control.lost_after_seconds),
            retry=RetryPolicy(
                max_attempts=control.max_attempts, max_job_faults=control.max_job_faults
            ),
            workers_off_ec2=control.workers_off_ec2,
            budget=MessageBudget(
                per_second=control.worker_messages_per_second,
                burst=control.worker_message_burst,
            ),
        )
    )
    return ControlPlaneService(
        store,
        clock,
        plane_settings,
        connect=lambda deliver, admit: MqttLink(link, WORKER_TOPICS, deliver, clock, admit=admit),
        refusals=refusals,
        leadership=leadership,
        team_spend=ledger.spent_today_by_team,
        job_cost=lambda job_id: job_cost_so_far(store.cost_facts, ledger, job_id, clock.now()),
    )


def reporter(settings: Settings, store: JobStore, clock: Clock, email: bool = True) -> Reporter:
    costs = settings.costs
    sender = None
    if email:
        ses = boto3.client("ses", region_name=settings.region, endpoint_url=settings.endpoint_url)
        sender = SesSender(ses)
    return Reporter(
        ledger=CostLedger(store.cost_facts, clock, costs.ledger()),
        sends=store.report_sends,
        sender=sender,
        settings=ReportSettings(
            tuple(costs.finance_recipients),
            costs.sender,
            costs.report_dir,
            tuple(costs.scheduled_reports),
            monthly_budget=costs.monthly_budget_usd,
            billing_account_id=costs.billing_account_id,
        ),
        clock=clock,
    )


@dataclass
class ControlPlane:
    store: JobStore
    intake: IntakeLoop
    intake_metrics: IntakeMetrics
    registry: CollectorRegistry
    service: ControlPlaneService | None = None
    interruptions: InterruptionsLoop | None = None
    reports: Reporter | None = None  # the finance reports on schedule, when configured
    gauges: PlaneGauges | None = None
    health: HealthServer | None = None  # /metrics, /healthz, /readyz, when a port is set
    api: ApiServer | None = None  # the HTTP API and console, when a port is set
    progress: ProgressRecorder | None = None  # workers' job steps, for the API
    leadership: Leadership | None = None  # the lease: whether this replica schedules
    door: ModelDoor | None = None  # the model registry's check, read again now and then
    notices: NoticeService | None = None  # completion notices, when a target is configured
    clock: Clock = field(default_factory=SystemClock)  # the loops' restarts wait on it

    async def run(self, stop: asyncio.Event) -> None:
        if self.health is not None:
            await self.health.start()
        try:
            await self._run(stop)
        finally:
            if self.health is not None:
                await self.health.stop()

    async def _run(self, stop: asyncio.Event) -> None:
        loops: dict[str, LoopRun] = {"intake": self.intake.run}
        parts: tuple[tuple[str, _Loop | None], ...] = (
            ("model door", self.door),
            ("gauges", self.gauges),
            ("reports", self.reports),
            ("control", self.service),
            ("interruptions", self.interruptions),
            ("API", self.api),
            ("progress", self.progress),
            ("leadership", self.leadership),
            ("notices", self.notices),
        )
        for name, part in parts:
            if part is not None:
                loops[name] = part.run
        # Each loop survives its own dependencies' outages; `keep_running` is for what it
        # did not foresee: one loop's fault never ends the process and the others with it.
        await asyncio.gather(
            *(keep_running(name, run, stop, self.clock, log) for name, run in loops.items())
        )


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
        async with (
            sqs_client(settings) as sqs,
            s3_client(settings) as s3,
            contextlib.AsyncExitStack() as senders,
        ):
            door = None
            if settings.model_registry:
                reader = S3RegistryReader(s3, settings.model_registry)
                refresh = timedelta(seconds=settings.model_registry_refresh_seconds)
                door = ModelDoor(reader, clock, refresh)
                await door.refresh()  # before the first message is taken
            intake = build_intake(sqs, settings, store.intake, clock, metrics, door)
            plane = ControlPlane(store, intake, metrics, registry, door=door, clock=clock)
            if settings.costs.finance_recipients and settings.costs.sender:
                plane.reports = reporter(settings, store, clock)
            if settings.mqtt.host is not None:
                dead_letters = SqsDeadLetterQueue(sqs, settings.require_queues()[1])
                refusals = RefusedMessages(clock, dead_letters, registry)
                plane.leadership = Leadership(
                    store.leases,
                    clock,
                    "control-plane",
                    settings.control.replica_id or replica_id(),
                    ttl=timedelta(seconds=settings.control.lease_seconds),
                )
                plane.service = build_control_service(
                    settings, store, clock, refusals, plane.leadership
                )
                plane.progress = ProgressRecorder(
                    plane.service.registry, store.pages, clock, leads=plane.service.leads
                )
                if settings.interruptions_queue_url:
                    plane.interruptions = InterruptionsLoop(
                        SqsQueue(sqs, settings.interruptions_queue_url),
                        dead_letters,
                        plane.service.instance_events,
                        clock,
                        settings.interruption_settings(),
                        InterruptionMetrics(registry),
                    )
            leads = plane.leadership.leading if plane.leadership else lambda: True
            plane.notices = await notice_service(settings, store, clock, leads, registry, senders)
            _observe(plane, settings, sqs, clock)
            if settings.api.port is not None:
                from framefleet.api_server import build_api  # FastAPI: only when it serves

                plane.api = build_api(settings, store, clock, door)
            yield plane
    finally:
        store.dispose()


def _observe(plane: ControlPlane, settings: Settings, sqs: SQSClient, clock: Clock) -> None:
    """The control plane's metrics, and its health endpoints when a port is set."""
    jobs_url, dead_letter_url = settings.require_queues()
    store = plane.store
    ledger = CostLedger(store.cost_facts, clock, settings.costs.ledger())

    def money() -> FleetMoney:
        today = ledger.today()
        return FleetMoney(today.total, today.usd_per_hour_now)

    async def store_answers() -> None:
        await asyncio.to_thread(store.count_jobs)

    async def queues_answer() -> None:
        await queue_depth(sqs, jobs_url)

    checks: dict[str, ReadinessCheck] = {
        "store": store_answers,
        "queues": queues_answer,
        # Any loop cut off from what it needs (S3, SES, EC2 included), retrying.
        "dependencies": report_outages(plane.registry),
    }
    service = plane.service
    if service is not None:
        metrics = PlaneMetrics(plane.registry)
        service.stats.observe_assignment = metrics.assignment_latency.observe
        service.stats.observe_checkpoint_write = metrics.checkpoint_write.observe
        service.stats.on_gpu_fault = lambda kind: metrics.gpu_faults.labels(kind).inc()
        plane.gauges = PlaneGauges(
            metrics,
            store,
            service.registry,
            clock,
            money=money,
            budget_per_day_usd=settings.autoscaler.budget_per_day,
            dead_letters=lambda: queue_depth(sqs, dead_letter_url),
        )

        async def broker_answers() -> None:
            connected = getattr(service.link, "connected", None)
            if isinstance(connected, asyncio.Event) and not connected.is_set():
                raise ConnectionError(f"not connected to MQTT at {settings.mqtt.host}")

        checks["broker"] = broker_answers
    if settings.metrics_port is not None:
        plane.health = HealthServer(
            plane.registry, checks, settings.metrics_host, settings.metrics_port
        )
