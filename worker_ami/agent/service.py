"""`framefleet-worker serve`: the agent as a long-running MQTT service.

It says hello (instance, slots, cached models), keeps a retained `status` with a last will
(offline), sends heartbeats with each job's progress and its recent outcomes, runs one job per
slot on `assign` (a job that spans GPUs on all of its slots: `slots.py`), checkpoints and stops
a job on `checkpoint_now`, `cancel` or `drain`, and turns an IMDS instance-action into a
checkpoint of every running job plus a `notice_seen` event.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import CollectorRegistry

from kernel.bounded import BoundedSet
from kernel.clock import Clock, sleep_unless_stopped
from kernel.log_context import bind
from kernel.market import Market
from kernel.mqtt_link import (
    ConnectHandler,
    LastWill,
    LinkSettings,
    MessageHandler,
    MqttLink,
    NotConnected,
)
from kernel.worker_protocol import (
    Channel,
    Command,
    CommandKind,
    EventKind,
    FailureKind,
    GpuInfo,
    JobProgress,
    ProtocolError,
    WarmModel,
    WorkerEvent,
    decode_command,
    topic,
)
from kernel.worker_side import Machine, Outgoing, WorkerSide
from worker_ami.agent.errors import JobFault, PreflightFailed
from worker_ami.agent.gpus import detect_gpus, health_of
from worker_ami.agent.imds import InterruptionWatcher, NoticeKind, SpotNotice
from worker_ami.agent.metrics import WorkerMetrics
from worker_ami.agent.parts import WorkerParts
from worker_ami.agent.report import JobReport, RunStatus
from worker_ami.agent.settings import WorkerSettings
from worker_ami.agent.slots import Slot, why_not

log = logging.getLogger(__name__)
AGENT_VERSION = "0.1.0"
SEEN_ASSIGNMENTS = 4096


@dataclass
class _State:
    accepting: bool = True
    # The newest assignments acted on: a re-send comes within seconds of the first, so
    # thousands remembered is plenty, and the memory stays bounded for a worker's lifetime.
    seen_assignments: BoundedSet[tuple[str, int]] = field(
        default_factory=lambda: BoundedSet(SEEN_ASSIGNMENTS)
    )
    notice_at: float | None = None  # monotonic time of the spot notice, once one came


class AgentLink(Protocol):
    """The worker's connection to the control plane (MqttLink)."""

    connected: asyncio.Event

    async def publish(self, topic: str, payload: str, retain: bool = False) -> None: ...

    async def run(self, stop: asyncio.Event) -> None: ...


# Builds the link around the service: commands to `on_command`, `on_connect` after every
# (re)connection, and `will` published by the broker if the worker vanishes.
ConnectAgentLink = Callable[[MessageHandler, ConnectHandler, LastWill], AgentLink]


def mqtt_agent_link(settings: WorkerSettings, worker_id: str, clock: Clock) -> ConnectAgentLink:
    """The production link: MQTT as the worker's own user, subscribed to its command topic."""
    link = LinkSettings(
        host=settings.mqtt_host,
        port=settings.mqtt_port,
        client_id=f"worker-{worker_id}",
        username=settings.mqtt_username or worker_id,
        password=settings.mqtt_password.get_secret_value() if settings.mqtt_password else None,
        tls=settings.mqtt_tls,
        ca_file=str(settings.mqtt_ca_file) if settings.mqtt_ca_file else None,
    )
    return lambda on_command, on_connect, will: MqttLink(
        link, [topic(worker_id, Channel.CMD)], on_command, clock, on_connect=on_connect, will=will
    )


class WorkerService:
    def __init__(
        self,
        worker_id: str,
        agent: WorkerParts,
        clock: Clock,
        connect: ConnectAgentLink,
        metrics: WorkerMetrics | None = None,
    ) -> None:
        self.worker_id = worker_id
        # Unscraped when none is given: its GPU readings are taken at scrapes only.
        self.metrics = metrics or WorkerMetrics(CollectorRegistry())
        self._agent = agent
        self._clock = clock
        self._detected = detect_gpus(agent.gpu_readings, agent.settings)
        self._slots = [
            Slot(d.gpu, d.device, agent.new_runner(d.device, d.gpu)) for d in self._detected
        ]
        self._state = _State()
        self._side = WorkerSide(worker_id)
        self._background: set[asyncio.Task[WorkerEvent]] = set()
        offline = self._side.status(clock.now(), online=False)
        will = LastWill(offline.topic, offline.payload)
        self.link = connect(self._on_command, self._announce, will)

    # -- lifecycle ----------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        # A slot is offered once its first job would start warm; the GPUs warm up together.
        await asyncio.gather(*(slot.runner.warm_up() for slot in self._slots))
        # The link outlives the service's stop: its last message is the offline status. Closed
        # with the service, it was half closed when that status went, which never arrived and
        # held every shutdown for the publish's timeout (10 s).
        link_stop = asyncio.Event()
        tasks = [
            asyncio.create_task(self.link.run(link_stop)),
            asyncio.create_task(self._heartbeats(stop)),
        ]
        if self._agent.imds is not None:
            watcher = InterruptionWatcher(
                self._agent.imds,
                self._clock,
                self._on_notice,
                self._agent.settings.imds_poll_seconds,
            )
            tasks.append(asyncio.create_task(watcher.run(stop)))
        try:
            await stop.wait()
            self.drain("service stopping")
            running = [slot.task for slot in self._slots if slot.task is not None]
            if running:
                await asyncio.gather(*running, return_exceptions=True)
            for slot in self._slots:
                await slot.runner.close()
            await self._send_status(online=False)
        finally:
            link_stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)

    def memory_sizes(self) -> dict[str, int]:
        """How much each in-memory map holds (tests/orchestrator/control/test_bounded_memory.py)."""
        return {
            "seen_assignments": len(self._state.seen_assignments),
            "recent": len(self._side.recent),
            "background": len(self._background),
        }

    def drain(self, reason: str) -> None:
        self._state.accepting = False
        for slot in self._slots:
            if slot.job_id is not None and slot.lead is None:
                slot.runner.request_checkpoint(reason)

    async def _announce(self) -> None:
        await self._send_status(online=True)
        identity = self._agent.identity
        machine = Machine(
            instance_id=identity.instance_id if identity else None,
            instance_type=identity.instance_type if identity else "local",
            availability_zone=identity.availability_zone if identity else "local",
            market=Market.SPOT if identity and identity.lifecycle == "spot" else Market.ON_DEMAND,
            gpus=tuple(slot.gpu for slot in self._slots),
            agent_version=AGENT_VERSION,
        )
        await self._send(self._side.hello(self._clock.now(), machine))

    async def _send_status(self, online: bool) -> None:
        await self._send(self._side.status(self._clock.now(), online))

    async def _send(self, message: Outgoing) -> None:
        try:
            await self.link.publish(message.topic, message.payload, retain=message.retain)
        except NotConnected as error:
            # Outcomes are repeated in every heartbeat; everything else is re-derived.
            log.info("not sent: %s", error)

    async def _heartbeats(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.link.connected.wait()
            beat = self._side.heartbeat(
                self._clock.now(),
                jobs=tuple(
                    JobProgress(
                        job_id=s.job_id,
                        attempt=s.attempt,
                        gpu_index=s.gpu.index,
                        step=s.step,
                        total_steps=s.total_steps,
                        dtype=s.runner.dtype,
                    )
                    for s in self._slots
                    if s.job_id is not None and s.lead is None
                ),
                warm_models=tuple(
                    WarmModel(gpu_index=s.gpu.index, model=model, stage=s.runner.warm_stage)
                    for s in self._slots
                    if s.job_id is None and (model := s.runner.warm_model) is not None
                ),
                gpus=await asyncio.to_thread(health_of, self._agent.gpu_readings, self._detected),
                accepting=self._state.accepting,
            )
            await self._send(beat)
            await sleep_unless_stopped(self._clock, stop, self._agent.settings.heartbeat_seconds)

    # -- events -------------------------------------------------------------------------------

    async def _event(self, kind: EventKind, **fields: object) -> WorkerEvent:
        event, message = self._side.event(self._clock.now(), kind, **fields)
        await self._send(message)
        return event

    async def _on_notice(self, notice: SpotNotice) -> None:
        await self._event(
            EventKind.NOTICE_SEEN, notice=f"{notice.kind.value} {notice.action or ''}".strip()
        )
        if notice.kind is NoticeKind.INSTANCE_ACTION:
            self._state.notice_at = self._clock.monotonic()
            self.drain(f"spot {notice.action} at {notice.time.isoformat()}")

    # -- commands -----------------------------------------------------------------------------

    async def _on_command(self, topic_name: str, payload: bytes) -> None:
        try:
            command = decode_command(topic_name, payload)
        except ProtocolError as error:
            log.warning("command ignored: %s", error)
            return
        if command.kind is CommandKind.ASSIGN:
            await self._assign(command)
        elif command.kind in {CommandKind.CHECKPOINT_NOW, CommandKind.CANCEL}:
            for slot in self._slots:
                if (slot.job_id, slot.attempt) == (command.job_id, command.attempt) and (
                    slot.lead is None
                ):
                    slot.runner.request_checkpoint(f"{command.kind.value} from the control plane")

    async def _assign(self, command: Command) -> None:
        key = (command.job_id or "", command.attempt or 0)
        if key in self._state.seen_assignments:
            return  # a re-sent command: the job is running or its outcome is in `recent`
        spec = command.spec
        if spec is None or command.attempt is None or command.gpu_index is None:
            log.warning("assign without spec, attempt or GPU ignored")
            return
        self._state.seen_assignments.add(key)
        slot = next((s for s in self._slots if s.gpu.index == command.gpu_index), None)
        span = [s for s in self._slots if s.gpu.index in command.span]
        can_span = self._agent.new_spanned_runner is not None
        why = why_not(self._state.accepting, slot, span, command, can_span)
        if why is not None or slot is None:
            outcome = await self._event(
                EventKind.FAILED,
                job_id=spec.job_id,
                attempt=command.attempt,
                failure_kind=FailureKind.REFUSED,
                error=why or "GPU not free",
            )
            self._side.recent.append(outcome)
            return
        if span and self._agent.new_spanned_runner is not None:
            devices = [slot.device, *(s.device for s in span)]
            spanned = self._agent.new_spanned_runner(devices, slot.gpu.family)
            slot.take_span(span, spanned, spec.job_id, command.attempt)
        if slot.runner.checkpoint_requested:
            # The previous job on this GPU was stopped on request; this runner is spent.
            spent, slot.runner = slot.runner, self._agent.new_runner(slot.device, slot.gpu)
            await spent.close()
        # Its progress starts at its checkpoint's step: a decoding stage (every step done)
        # reports no step, and the control plane's stall watch leaves such a job alone.
        slot.job_id, slot.attempt, slot.step, slot.total_steps = (
            spec.job_id,
            command.attempt,
            min(command.resume_step or 0, spec.steps),
            spec.steps,
        )
        slot.task = asyncio.create_task(self._run_job(slot, command))

    async def _run_job(self, slot: Slot, command: Command) -> None:
        assert command.spec is not None
        assert command.attempt is not None
        spec, attempt = command.spec, command.attempt
        bind(job_id=spec.job_id, attempt=attempt, output=spec.output)  # (job_logs.py)
        loop = asyncio.get_running_loop()

        def progress(step: int) -> None:
            slot.step = step
            self.metrics.steps.inc()

        def checkpointed(key: str, step: int, write_seconds: float) -> None:
            self.metrics.checkpoint_write.observe(write_seconds)
            task = loop.create_task(
                self._event(
                    EventKind.CHECKPOINT_DURABLE,
                    job_id=spec.job_id,
                    attempt=attempt,
                    step=step,
                    checkpoint=key,
                    write_seconds=round(write_seconds, 3),
                    gpu_family=slot.gpu.family,
                )
            )
            self._background.add(task)
            task.add_done_callback(self._background.discard)

        slot.runner.on_step = progress
        slot.runner.on_checkpoint = checkpointed
        try:
            try:
                # Before accepting: a machine that cannot run it says why (kept off it).
                await self._agent.preflight(spec, slot.runner, command.resume_from, command.stage)
            except (PreflightFailed, JobFault) as error:
                # A JobFault is the job's own (an unknown model, a stage's input gone): not
                # this machine's, nor any other's.
                machine = isinstance(error, PreflightFailed)
                why = "; ".join(error.reasons) if isinstance(error, PreflightFailed) else str(error)
                outcome = await self._event(
                    EventKind.FAILED,
                    job_id=spec.job_id,
                    attempt=attempt,
                    failure_kind="preflight" if machine else "job",
                    error=why,
                )
            else:
                await self._event(
                    EventKind.STARTED,
                    job_id=spec.job_id,
                    attempt=attempt,
                    render=slot.runner.prepared,
                )
                with self.metrics.jobs_running.track_inprogress():
                    report = await slot.runner.run(
                        spec,
                        attempt,
                        command.resume_from,
                        command.mtbi_seconds,
                        command.expected_step_seconds,
                        command.stage,
                    )
                outcome = await self._outcome(report, slot.gpu)
            self._side.recent.append(outcome)
        finally:
            slot.job_id, slot.task = None, None
            await slot.end_span()

    async def _outcome(self, report: JobReport, gpu: GpuInfo) -> WorkerEvent:
        self.metrics.jobs.labels(report.status.value).inc()
        if report.status is RunStatus.PREEMPTED and self._state.notice_at is not None:
            self.metrics.notice_to_durable.observe(self._clock.monotonic() - self._state.notice_at)
        common: dict[str, object] = {
            "job_id": report.job_id,
            "attempt": report.attempt,
            "step": report.steps_done,
            "model_load_seconds": round(report.timings.model_load_s, 3),
        }
        if report.status is RunStatus.SUCCEEDED:
            return await self._event(
                EventKind.FINISHED,
                output=report.output_video,
                video_sha256=report.video_sha256,
                denoise_seconds=round(report.timings.denoise_s, 3),
                **common,
            )
        if report.status in (RunStatus.PREEMPTED, RunStatus.STAGE_DONE):
            stopped = (
                EventKind.PREEMPTED
                if report.status is RunStatus.PREEMPTED
                else EventKind.STAGE_DONE
            )
            return await self._event(
                stopped, checkpoint=report.checkpoint, gpu_family=gpu.family, **common
            )
        fault = report.failure_kind or FailureKind.WORKER
        return await self._event(
            EventKind.FAILED, failure_kind=fault, error=report.error, gpu_index=gpu.index, **common
        )
