"""`framefleet-worker`: run one job, publish a model, serve an IMDS emulator, check the GPU.

    framefleet-worker run --job job.json [--resume s3://bucket/checkpoints/.../manifest.json]

Exit status of `run`: 0 succeeded, 75 preempted (checkpoint durable), 1 failed, 2 refused or
misconfigured. The run report is printed as JSON on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from prometheus_client import CollectorRegistry

from framefleet.health_server import HealthServer, ReadinessCheck
from framefleet.worker_process import worker_parts
from kernel.clock import SystemClock, stop_on_signals
from kernel.job_spec import JobSpec, parse_job
from kernel.log_context import bind
from kernel.settings_support import configure_logging, exit_with
from worker_ami.agent.errors import WorkerError
from worker_ami.agent.imds_emulator import ImdsEmulator, InstanceIdentity
from worker_ami.agent.job_logs import JobLogBuffer, JobLogShipper
from worker_ami.agent.metrics import WorkerMetrics
from worker_ami.agent.model_cache import ModelCache, ModelRegistry, publish_model
from worker_ami.agent.object_store import S3ObjectStore, s3_client
from worker_ami.agent.parts import WorkerParts
from worker_ami.agent.report import RunStatus
from worker_ami.agent.s3_uri import split_s3_uri
from worker_ami.agent.service import WorkerService, mqtt_agent_link
from worker_ami.agent.settings import GIB, WorkerSettings, load_worker_settings
from worker_ami.agent.telemetry import NvmlUnavailable, read_gpus

EXIT_PREEMPTED = 75


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="framefleet-worker", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run one job")
    run.add_argument("--job", type=Path, required=True)
    run.add_argument("--attempt", type=int, default=1)
    run.add_argument("--resume", help="s3:// URI of a checkpoint manifest to try first")
    run.add_argument("--skip-preflight", action="store_true")

    commands.add_parser("serve", help="run as an MQTT service driven by the control plane")

    publish = commands.add_parser("publish-model", help="upload a save_pretrained folder")
    publish.add_argument("--name", required=True)
    publish.add_argument("--revision", required=True)
    publish.add_argument("--source", type=Path, required=True)
    publish.add_argument("--uri", required=True, help="s3://bucket/prefix/")

    warm = commands.add_parser("warm-cache", help="fetch models into the local cache")
    warm.add_argument("--model", action="append", required=True)

    tiny = commands.add_parser("build-tiny-model", help="write a tiny random-weight pipeline")
    tiny.add_argument("--output", type=Path, required=True)

    emulator = commands.add_parser("imds-emulator", help="serve an IMDSv2 emulator")
    emulator.add_argument("--port", type=int, default=8111)
    emulator.add_argument("--lifecycle", choices=["spot", "on-demand"], default="spot")
    emulator.add_argument("--instance-id", default="i-0123456789abcdef0")

    commands.add_parser("telemetry", help="GPU telemetry through NVML")
    return parser


def _read_job(path: Path) -> JobSpec:
    try:
        return parse_job(path.read_text(), now=None)
    except OSError as error:
        raise WorkerError(f"cannot read job file {path}: {error}") from None


async def _run(settings: WorkerSettings, args: argparse.Namespace) -> int:
    spec = _read_job(args.job)
    preferred = None
    if args.resume:
        bucket, preferred = split_s3_uri(args.resume)
        if bucket != settings.require_checkpoint_bucket():
            raise WorkerError(f"--resume must point into s3://{settings.checkpoint_bucket}/")
    async with worker_parts(settings, SystemClock()) as agent:
        loop = asyncio.get_running_loop()
        # SIGTERM (a drain, or systemd stopping us) checkpoints at the next step boundary.
        loop.add_signal_handler(
            signal.SIGTERM, agent.runner.request_checkpoint, "SIGTERM: draining"
        )
        if not args.skip_preflight:
            await agent.preflight(spec)
        report = await agent.run_job(spec, args.attempt, preferred)
    sys.stdout.write(report.model_dump_json(indent=2, by_alias=True) + "\n")
    return {
        RunStatus.SUCCEEDED: 0,
        RunStatus.PREEMPTED: EXIT_PREEMPTED,
        RunStatus.FAILED: 1,
    }[report.status]


async def _serve(settings: WorkerSettings) -> int:
    clock = SystemClock()
    async with worker_parts(settings, clock) as agent:
        # On EC2 the worker is its instance: the broker account and the control plane know
        # it by the instance id, and a hello under any other name is refused.
        instance_id = agent.identity.instance_id if agent.identity else None
        worker_id = instance_id or settings.worker_id
        if worker_id is None:
            raise WorkerError(
                "set FRAMEFLEET_WORKER_WORKER_ID (or enable IMDS for the instance id)"
            )
        if settings.worker_id not in (None, worker_id):
            raise WorkerError(
                f"FRAMEFLEET_WORKER_WORKER_ID={settings.worker_id} on instance {worker_id}: "
                "on EC2 the worker id is the instance id; leave it unset"
            )
        connect = mqtt_agent_link(settings, worker_id, clock)
        registry = CollectorRegistry()
        service = WorkerService(worker_id, agent, clock, connect, WorkerMetrics(registry))
        bind(worker_id=worker_id, instance_id=instance_id)  # on every line it logs from here
        health = None
        if settings.metrics_port is not None:
            health = HealthServer(
                registry,
                worker_checks(service, agent),
                settings.metrics_host,
                settings.metrics_port,
            )
            await health.start()
        job_logs = JobLogBuffer()
        logging.getLogger().addHandler(job_logs)
        shipper = JobLogShipper(job_logs, agent.store, clock)
        stop = stop_on_signals()
        shipping = asyncio.create_task(shipper.run(stop))
        try:
            # A drain: running jobs checkpoint at their next step, then the service exits.
            await service.run(stop)
        finally:
            stop.set()
            await shipping
            await shipper.flush()  # the jobs' last lines
            logging.getLogger().removeHandler(job_logs)
            if health is not None:
                await health.stop()
    return 0


def worker_checks(service: WorkerService, agent: WorkerParts) -> dict[str, ReadinessCheck]:
    """Ready: connected to the broker, and the checkpoint bucket answers."""
    bucket = agent.settings.require_checkpoint_bucket()

    async def broker_answers() -> None:
        if not service.link.connected.is_set():
            raise ConnectionError(f"not connected to MQTT at {agent.settings.mqtt_host}")

    async def bucket_answers() -> None:
        await agent.store.list_keys(bucket, "framefleet-readiness-probe/")

    return {"broker": broker_answers, "checkpoints": bucket_answers}


async def _publish(settings: WorkerSettings, args: argparse.Namespace) -> int:
    async with s3_client(settings) as s3:
        manifest = await publish_model(
            S3ObjectStore(s3), args.source, args.uri, args.name, args.revision
        )
    print(f"published {manifest.name}@{manifest.revision}: {len(manifest.files)} files")
    return 0


async def _warm(settings: WorkerSettings, names: list[str]) -> int:
    registry = ModelRegistry.from_file(settings.model_registry)
    async with s3_client(settings) as s3:
        cache = ModelCache(
            S3ObjectStore(s3),
            settings.cache_dir,
            int(settings.cache_budget_gib * GIB),
            SystemClock(),
        )
        for name in names:
            model = await cache.ensure(name, registry.resolve(name))
            print(f"cached {name}@{model.revision} at {model.path}")
    return 0


async def _emulator(args: argparse.Namespace) -> int:
    emulator = ImdsEmulator(
        SystemClock(), InstanceIdentity(instance_id=args.instance_id, lifecycle=args.lifecycle)
    )
    url = await emulator.start(port=args.port)
    print(f"IMDSv2 emulator at {url}", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        await stop.wait()
    finally:
        await emulator.stop()
    return 0


# The agent's log format: "text", or "json" for a log shipper (read before its settings, so the
# first lines are in it too).
LOG_FORMAT_ENV = "FRAMEFLEET_WORKER_LOG_FORMAT"


def run(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    configure_logging("INFO", log_format=os.environ.get(LOG_FORMAT_ENV, "text"))
    if args.command == "build-tiny-model":
        from worker_ami.agent.tiny_model import build_tiny_wan

        print(build_tiny_wan(args.output))
        return 0
    if args.command == "imds-emulator":
        return asyncio.run(_emulator(args))
    if args.command == "telemetry":
        gpus = read_gpus()
        if isinstance(gpus, NvmlUnavailable):
            print(gpus.reason)
            return 0
        print(json.dumps([gpu.__dict__ for gpu in gpus], indent=2))
        return 0
    settings = load_worker_settings()
    if args.command == "publish-model":
        return asyncio.run(_publish(settings, args))
    if args.command == "warm-cache":
        return asyncio.run(_warm(settings, args.model))
    if args.command == "serve":
        return asyncio.run(_serve(settings))
    return asyncio.run(_run(settings, args))


def main(argv: Sequence[str] | None = None) -> None:
    exit_with("framefleet-worker", lambda: run(argv))


if __name__ == "__main__":
    main()
