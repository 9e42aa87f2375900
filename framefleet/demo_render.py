"""The render stage of `make demo`: two in-process workers (the agent's own composition root,
each with its own IMDSv2 emulator) render the queued jobs with a tiny random-weight Wan model,
placed by the real scheduler. The top job's spot instance gets an interruption notice halfway:
the agent checkpoints, the job moves to the other worker, resumes, and its MP4 is compared byte
for byte with an uninterrupted reference render.

This module plays the control plane's part in-process, so the demo needs no broker: it moves
jobs through the store's state machine and hands them to the workers. The MQTT control plane
itself runs in the end-to-end tests (tests/worker/test_end_to_end.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import boto3
from rich.console import Console
from rich.table import Table

from framefleet.worker_process import worker_parts
from kernel.clock import SystemClock
from kernel.job_record import JobRecord
from kernel.job_spec import JobSpec
from kernel.job_state import JobState
from orchestrator.scheduling.policy import schedule
from orchestrator.scheduling.snapshots import GpuSlot, PendingJob, WorkerSnapshot
from orchestrator.store.job_store import JobStore
from worker_ami.agent.denoise_state import DenoiseState
from worker_ami.agent.imds_emulator import ImdsEmulator, InstanceIdentity
from worker_ami.agent.model_cache import publish_model
from worker_ami.agent.object_store import S3ObjectStore, s3_client
from worker_ami.agent.parts import WorkerParts
from worker_ami.agent.report import JobReport, RunStatus
from worker_ami.agent.settings import WorkerSettings
from worker_ami.agent.tiny_model import build_tiny_wan

DEMO_MODEL = "wan/tiny-demo"
CONTROL_PLANE = "demo-control-plane"


@dataclass
class DemoWorker:
    worker_id: str
    agent: WorkerParts
    imds: ImdsEmulator
    gpu: GpuSlot
    interrupted: bool = False


@asynccontextmanager
async def demo_workers(
    endpoint: str, folder: Path, buckets: dict[str, str]
) -> AsyncIterator[list[DemoWorker]]:
    registry = folder / "models.json"
    uri = f"s3://{buckets['models']}/tiny-demo/"
    registry.write_text(json.dumps({"models": {DEMO_MODEL: {"uri": uri, "revision": "r1"}}}))
    model_dir = build_tiny_wan(folder / "tiny-demo-model")
    async with s3_client(WorkerSettings(endpoint_url=endpoint)) as client:
        await publish_model(S3ObjectStore(client), model_dir, uri, DEMO_MODEL, "r1")
    async with AsyncExitStack() as stack:
        workers = []
        for name, zone in (("spot-a", "us-east-1a"), ("spot-b", "us-east-1f")):
            emulator = ImdsEmulator(
                SystemClock(), InstanceIdentity(availability_zone=zone, lifecycle="spot")
            )
            url = await emulator.start()
            stack.push_async_callback(emulator.stop)
            settings = WorkerSettings(
                endpoint_url=endpoint, checkpoint_bucket=buckets["checkpoints"],
                model_registry=registry, cache_dir=folder / f"cache-{name}", device="cpu",
                allow_cpu=True, imds_url=url, imds_poll_seconds=0.05, min_free_disk_gib=0,
            )  # fmt: skip
            agent = await stack.enter_async_context(worker_parts(settings, SystemClock()))
            gpu = GpuSlot(name, 0, "l40s", 48.0)
            workers.append(DemoWorker(name, agent, emulator, gpu))
        yield workers


def _pending(record: JobRecord) -> PendingJob:
    spec = record.spec
    return PendingJob(
        record.job_id, record.priority, record.deadline, record.created_at,
        spec.gpu.min_vram_gib, frozenset(spec.gpu.families),
    )  # fmt: skip


def _move(store: JobStore, job_id: str, *targets: JobState, reason: str, worker: str = "") -> None:
    for target in targets:
        record = store.get(job_id)
        store.transition(
            job_id, target, expected_version=record.version, actor=CONTROL_PLANE, reason=reason,
            worker_id=worker or None,
        )  # fmt: skip


async def render_queue(
    store: JobStore, workers: list[DemoWorker], interrupt_job: str, console: Console
) -> dict[str, object]:
    """Place and run every queued job; interrupt `interrupt_job` halfway through."""
    facts: dict[str, object] = {}
    resume_from: dict[str, str] = {}
    while queued := store.list_jobs(JobState.QUEUED):
        snapshots = [
            WorkerSnapshot(w.worker_id, (w.gpu,), accepting=not w.interrupted) for w in workers
        ]
        decisions = schedule([_pending(r) for r in queued], snapshots, SystemClock().now())
        if not decisions.assignments:
            raise RuntimeError("no worker can take the remaining jobs")
        for assignment in decisions.assignments:
            target = next(w for w in workers if w.worker_id == assignment.worker_id)
            record = store.get(assignment.job_id)
            _move(store, record.job_id, JobState.ASSIGNED, reason=assignment.reason,
                  worker=target.worker_id)  # fmt: skip
            _move(store, record.job_id, JobState.RUNNING, reason=f"started on {target.worker_id}")
            attempt = store.get(record.job_id).attempt
            noticed_at: list[float] = []
            if record.job_id == interrupt_job and attempt == 1:
                # Early enough that the agent's IMDS poll sees it well before the job ends.
                def notice(
                    state: DenoiseState, w: DemoWorker = target, marks: list[float] = noticed_at
                ) -> None:
                    if state.step == 3 and not marks:
                        w.imds.set_instance_action("terminate")  # the two-minute warning
                        marks.append(time.perf_counter())

                target.agent.runner.on_step = notice
            report = await target.agent.run_job(
                record.spec, attempt, resume_from.get(record.job_id)
            )
            target.agent.runner.on_step = None
            _settle(store, record.job_id, target, report, resume_from, console)
            if report.status is RunStatus.PREEMPTED and noticed_at:
                target.interrupted = True  # its instance is being reclaimed
                facts["notice_to_durable_s"] = time.perf_counter() - noticed_at[0]
                facts["checkpoint"] = report.checkpoint
                facts["checkpoint_step"] = report.steps_done
            if record.job_id == interrupt_job and report.status is RunStatus.SUCCEEDED:
                facts["resumed_on"] = target.worker_id
                facts["resumed_sha256"] = report.video_sha256
    return facts


def _settle(
    store: JobStore,
    job_id: str,
    target: DemoWorker,
    report: JobReport,
    resume_from: dict[str, str],
    console: Console,
) -> None:
    if report.status is RunStatus.SUCCEEDED:
        _move(store, job_id, JobState.SUCCEEDED, reason=f"output {report.output_video}")
        digest = (report.video_sha256 or "")[:12]
        console.print(
            f"  {job_id}: succeeded on {target.worker_id} "
            f"({report.steps_done} steps, sha256 {digest}...)"
        )
    elif report.status is RunStatus.PREEMPTED and report.checkpoint:
        resume_from[job_id] = report.checkpoint
        why = f"spot interruption on {target.worker_id}; checkpoint {report.checkpoint}"
        _move(
            store, job_id, JobState.CHECKPOINTING, JobState.PREEMPTED, JobState.QUEUED, reason=why
        )
        console.print(
            f"  {job_id}: [yellow]spot notice on {target.worker_id}[/]; checkpoint at "
            f"step {report.steps_done} durable; back in the queue"
        )
    else:
        _move(store, job_id, JobState.FAILED, reason=report.error or "failed")
        console.print(f"  {job_id}: [red]failed[/]: {report.error}")


async def reference_render(workers: list[DemoWorker], spec: JobSpec) -> str | None:
    """The same job rendered without interruption, under another id and output prefix."""
    reference = spec.model_copy(
        update={"job_id": f"{spec.job_id}-reference", "output": f"{spec.output}reference/"}
    )
    survivor = next(w for w in workers if not w.interrupted)
    report = await survivor.agent.run_job(reference, 1)
    return report.video_sha256


def interruption_table(facts: dict[str, object], reference_sha: str | None) -> Table:
    table = Table(title="spot interruption of the top-priority job")
    table.add_column("what")
    table.add_column("value")
    same = facts.get("resumed_sha256") == reference_sha and reference_sha is not None
    latency = facts.get("notice_to_durable_s", 0.0)
    rows = [
        (
            "checkpoint written on notice",
            f"step {facts.get('checkpoint_step')}: {facts.get('checkpoint')}",
        ),
        (
            "notice in IMDS -> checkpoint durable",
            f"{latency:.2f} s" if isinstance(latency, float) else "-",
        ),
        ("resumed on", str(facts.get("resumed_on"))),
        ("MP4 sha256 (resumed)", str(facts.get("resumed_sha256"))),
        ("MP4 sha256 (uninterrupted reference)", str(reference_sha)),
        ("identical", "[green]yes, bit for bit[/]" if same else "[red]NO[/]"),
    ]  # fmt: skip
    for what, value in rows:
        table.add_row(what, value)
    return table


def create_buckets(endpoint: str) -> dict[str, str]:
    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=endpoint)
    buckets = {
        "models": "framefleet-demo-models",
        "checkpoints": "framefleet-demo-checkpoints",
        "outputs": "framefleet-demo-output",
    }
    for bucket in buckets.values():
        s3.create_bucket(Bucket=bucket)
    return buckets


async def run_render_stage(
    endpoint: str, folder: Path, store: JobStore, interrupt_job: str, console: Console
) -> bool:
    buckets = create_buckets(endpoint)
    async with demo_workers(endpoint, folder, buckets) as workers:
        console.print("rendering (tiny random-weight model on CPU; the videos are noise):")
        facts = await render_queue(store, workers, interrupt_job, console)
        reference_sha = await reference_render(workers, store.get(interrupt_job).spec)
    console.print(interruption_table(facts, reference_sha))
    return facts.get("resumed_sha256") == reference_sha
