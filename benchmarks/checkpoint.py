"""Checkpoint cost and notice-to-durable latency of the worker agent, on CPU against moto S3.

    .venv/bin/python -m benchmarks.checkpoint [--trials 30] [--poll 2.0]

Reports, for latents of several sizes: checkpoint write and read (verify + decode) time and
size; per model config the step time and the checkpoint overhead at the Young/Daly interval;
and the latency from an instance-action appearing in IMDS to the checkpoint manifest being
durable in S3 (p50, p99), with the agent polling IMDS every --poll seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import boto3
import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from benchmarks.common import moto_server_process, write_result
from kernel.clock import SystemClock
from kernel.job_spec import parse_job
from kernel.model_registry import ModelEntry
from worker_ami.agent.checkpoint import CheckpointIdentity, CheckpointStore
from worker_ami.agent.denoise_state import DenoiseState
from worker_ami.agent.imds import ImdsClient, InterruptionWatcher, NoticeKind, SpotNotice
from worker_ami.agent.imds_emulator import ImdsEmulator
from worker_ami.agent.model_cache import ModelCache, ModelRegistry, publish_model
from worker_ami.agent.object_store import S3ObjectStore, s3_client
from worker_ami.agent.report import RunStatus
from worker_ami.agent.runner import JobRunner, RunnerSettings
from worker_ami.agent.settings import WorkerSettings
from worker_ami.agent.state_codec import encode_state
from worker_ami.agent.tiny_model import build_tiny_wan

HOUR = 3600.0


@dataclass(frozen=True)
class LatentShape:
    label: str
    frames: int
    height: int
    width: int

    def state(self) -> DenoiseState:
        latent_frames = (self.frames - 1) // 4 + 1
        latents = torch.randn(1, 16, latent_frames, self.height // 8, self.width // 8)
        generator = torch.Generator().manual_seed(0)
        return DenoiseState(
            step=10,
            total_steps=50,
            latents=latents,
            generator_state=generator.get_state(),
            sigmas=torch.linspace(1, 0, 51),
            timesteps=torch.linspace(1000, 0, 50),
        )


SHAPES = [
    LatentShape("tiny test (9x32x32)", 9, 32, 32),
    LatentShape("cpu-sized (33x256x256)", 33, 256, 256),
    LatentShape("480p (81x480x832)", 81, 480, 832),
    LatentShape("720p (81x720x1280)", 81, 720, 1280),
]
MODELS = {
    "tiny test model": ({"layers": 2, "heads": 2, "head_dim": 12}, (9, 32, 32)),
    "cpu-sized model": (
        {"layers": 4, "heads": 4, "head_dim": 32, "vae_base_dim": 8},
        (33, 128, 128),
    ),
}


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


async def checkpoint_io(store: CheckpointStore, repeats: int) -> list[dict[str, float | str]]:
    rows: list[dict[str, float | str]] = []
    for shape in SHAPES:
        state = shape.state()
        identity = CheckpointIdentity(
            job_id=f"bench-{shape.frames}-{shape.width}",
            job_spec_sha256="0" * 64,
            model="m",
            model_revision="r",
            pipeline_config_sha256="0" * 64,
            total_steps=50,
        )
        size = sum(len(blob) for blob in encode_state(state).values())
        writes, reads = [], []
        for attempt in range(repeats):
            started = time.perf_counter()
            key = await store.write(state, identity, attempt, SystemClock().now())
            writes.append(time.perf_counter() - started)
            started = time.perf_counter()
            loaded, _ = await store.load(key, identity)
            reads.append(time.perf_counter() - started)
            assert torch.equal(loaded.latents, state.latents)
        rows.append(
            {
                "latents": shape.label,
                "bytes": size,
                "write_p50_s": statistics.median(writes),
                "read_p50_s": statistics.median(reads),
            }
        )
    return rows


async def notice_latency(
    make_runner: Callable[[], JobRunner],
    emulator: ImdsEmulator,
    imds_url: str,
    spec_fields: dict[str, object],
    trials: int,
    poll: float,
) -> list[float]:
    latencies = []
    rng = np.random.default_rng(7)
    async with aiohttp.ClientSession() as http:
        for trial in range(trials):
            emulator.clear_notices()
            runner = make_runner()  # a fresh agent per notice, as after a real interruption
            # The notice lands at a uniformly random point of the IMDS poll cycle.
            delay = 0.5 + float(rng.uniform(0, poll))
            set_at: list[float] = []

            async def notice_later(pause: float = delay, marks: list[float] = set_at) -> None:
                await asyncio.sleep(pause)
                emulator.set_instance_action()
                marks.append(time.perf_counter())

            async def on_notice(notice: SpotNotice, runner: JobRunner = runner) -> None:
                if notice.kind is NoticeKind.INSTANCE_ACTION:
                    runner.request_checkpoint("benchmark notice")

            spec = parse_job(
                {
                    **spec_fields,
                    "job_id": f"latency-{spec_fields['model']}-{trial}".replace("/", "-"),
                    "steps": 1000,
                },
                now=None,
            )
            stop = asyncio.Event()
            watcher = InterruptionWatcher(
                ImdsClient(http, imds_url, SystemClock()), SystemClock(), on_notice, poll
            )
            watching = asyncio.create_task(watcher.run(stop))
            noticing = asyncio.create_task(notice_later())
            report = await runner.run(spec, attempt=1)
            durable_at = time.perf_counter()
            stop.set()
            await asyncio.gather(watching, noticing)
            assert report.status is RunStatus.PREEMPTED, report.error
            latencies.append(durable_at - set_at[0])
    return latencies


async def run(trials: int, poll: float, repeats: int) -> None:
    console = Console(width=160)
    results: dict[str, object] = {"trials": trials, "imds_poll_seconds": poll}
    with moto_server_process() as endpoint, tempfile.TemporaryDirectory() as scratch:
        s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=endpoint)
        for bucket in ("bench-models", "bench-ckpt", "bench-out"):
            s3.create_bucket(Bucket=bucket)
        settings = WorkerSettings(endpoint_url=endpoint, checkpoint_bucket="bench-ckpt")
        async with s3_client(settings) as client:
            objects = S3ObjectStore(client)
            store = CheckpointStore(objects, "bench-ckpt", keep=2)
            io_rows = await checkpoint_io(store, repeats)
            results["checkpoint_io"] = io_rows

            model_rows = []
            emulator = ImdsEmulator(SystemClock())
            imds_url = await emulator.start()
            for label, (shape, (frames, height, width)) in MODELS.items():
                folder = build_tiny_wan(Path(scratch) / label.replace(" ", "-"), **shape)
                name = "wan/" + label.replace(" ", "-")
                uri = f"s3://bench-models/{name}/"
                await publish_model(objects, folder, uri, name, "r1")
                registry = ModelRegistry(models={name: ModelEntry(uri=uri, revision="r1")})
                cache = ModelCache(objects, Path(scratch) / "cache", 10**10, SystemClock())

                def make_runner(
                    registry: ModelRegistry = registry, cache: ModelCache = cache
                ) -> JobRunner:
                    return JobRunner(
                        objects,
                        store,
                        cache,
                        registry,
                        SystemClock(),
                        RunnerSettings(device="cpu", mean_time_between_interruptions_s=math.inf),
                    )

                runner = make_runner()
                fields: dict[str, object] = {
                    "schema": "framefleet.job/v1",
                    "model": name,
                    "prompt": "a red fox in snow",
                    "width": width,
                    "height": height,
                    "num_frames": frames,
                    "seed": 1,
                    "output": "s3://bench-out/v/",
                }
                full = await runner.run(
                    parse_job({**fields, "job_id": "steps", "steps": 6}, now=None), 1
                )
                step_s = full.timings.denoise_s / 6
                latencies = await notice_latency(
                    make_runner, emulator, imds_url, fields, trials, poll
                )
                state_shape = LatentShape(label, frames, height, width).state()
                delta = statistics.median(await write_times(store, state_shape, label, repeats))
                row = {
                    "model": label,
                    "video": f"{frames}x{height}x{width}",
                    "step_s": step_s,
                    "checkpoint_write_s": delta,
                    "overhead_at_tau_M1h": delta / (2 * delta * HOUR) ** 0.5,
                    "overhead_at_tau_M6h": delta / (2 * delta * 6 * HOUR) ** 0.5,
                    "tau_M6h_s": (2 * delta * 6 * HOUR) ** 0.5,
                    "notice_to_durable_p50_s": pct(latencies, 50),
                    "notice_to_durable_p99_s": pct(latencies, 99),
                    "notice_to_durable_max_s": max(latencies),
                }
                model_rows.append(row)
            await emulator.stop()
            results["models"] = model_rows

    table = Table(title="checkpoint write and read through moto S3 (median)")
    for column in ("latents", "size", "write", "read + verify"):
        table.add_column(column, justify="right")
    for row in io_rows:
        table.add_row(
            str(row["latents"]),
            f"{float(row['bytes']) / 1e6:.2f} MB",
            f"{float(row['write_p50_s']) * 1000:.1f} ms",
            f"{float(row['read_p50_s']) * 1000:.1f} ms",
        )
    console.print(table)
    table = Table(title=f"per model on CPU; IMDS polled every {poll:g} s; {trials} notices each")
    for column in (
        "model",
        "video",
        "step",
        "ckpt write",
        "overhead at tau (M=1h / 6h)",
        "notice->durable p50",
        "p99",
        "max",
    ):
        table.add_column(column, justify="right")
    for row in model_rows:
        table.add_row(
            str(row["model"]),
            str(row["video"]),
            f"{float(row['step_s']) * 1000:.0f} ms",
            f"{float(row['checkpoint_write_s']) * 1000:.1f} ms",
            f"{float(row['overhead_at_tau_M1h']):.3%} / {float(row['overhead_at_tau_M6h']):.3%}",
            f"{float(row['notice_to_durable_p50_s']):.2f} s",
            f"{float(row['notice_to_durable_p99_s']):.2f} s",
            f"{float(row['notice_to_durable_max_s']):.2f} s",
        )
    console.print(table)
    console.print(f"wrote {write_result('checkpoint', results)}")


async def write_times(
    store: CheckpointStore, state: DenoiseState, label: str, repeats: int
) -> list[float]:
    identity = CheckpointIdentity(
        job_id="delta-" + label.replace(" ", "-"),
        job_spec_sha256="0" * 64,
        model="m",
        model_revision="r",
        pipeline_config_sha256="0" * 64,
        total_steps=state.total_steps,
    )
    times = []
    for attempt in range(repeats):
        started = time.perf_counter()
        await store.write(state, identity, attempt, SystemClock().now())
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--poll", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(run(args.trials, args.poll, args.repeats))


if __name__ == "__main__":
    main()
