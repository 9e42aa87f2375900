"""`framefleet-worker` as the systemd unit runs it: a real process, IMDS over HTTP, moto S3."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from framefleet.worker_cli import EXIT_PREEMPTED
from tests.support.renders import Buckets, read_object, video_job
from tests.support.waits import async_wait_until
from tests.support.worker_process import run_worker, worker_env
from worker_ami.agent.imds_emulator import ImdsEmulator
from worker_ami.agent.model_cache import ModelRegistry
from worker_ami.agent.settings import WorkerSettings

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


async def run_worker_async(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Like run_worker, but leaves the event loop free to serve the in-process IMDS emulator."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "framefleet.worker_cli",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(300):
        stdout, stderr = await process.communicate()
    assert process.returncode is not None
    return subprocess.CompletedProcess(args, process.returncode, stdout.decode(), stderr.decode())


def env_with_imds(settings: WorkerSettings, tmp_path: Path, imds_url: str) -> dict[str, str]:
    env = worker_env(settings, tmp_path / "cache")
    env.update(
        {
            "FRAMEFLEET_WORKER_IMDS_ENABLED": "true",
            "FRAMEFLEET_WORKER_IMDS_URL": imds_url,
            "FRAMEFLEET_WORKER_IMDS_POLL_SECONDS": "0.05",
        }
    )
    return env


async def test_a_job_runs_to_a_committed_output_once(
    published_model: ModelRegistry,
    worker_settings: WorkerSettings,
    buckets: Buckets,
    s3: S3Client,
    imds: tuple[ImdsEmulator, str],
    tmp_path: Path,
) -> None:
    spec = video_job(buckets, "cli-job")
    job_file = tmp_path / "job.json"
    job_file.write_text(spec.canonical_json())
    env = env_with_imds(worker_settings, tmp_path, imds[1])

    first = await run_worker_async(env, "run", "--job", str(job_file))
    assert first.returncode == 0, first.stderr[-3000:]
    report = json.loads(first.stdout)
    assert report["status"] == "succeeded"
    assert report["output_video"] == f"s3://{buckets.outputs}/cli-job/cli-job.mp4"
    video = read_object(s3, buckets.outputs, "cli-job/cli-job.mp4")
    assert video[4:8] == b"ftyp"  # an MP4
    metadata = json.loads(read_object(s3, buckets.outputs, "cli-job/cli-job.json"))
    assert metadata["video_sha256"] == report["video_sha256"]
    assert metadata["frames"] == spec.num_frames

    # A duplicate attempt renders again but cannot clobber the committed output.
    second = await run_worker_async(env, "run", "--job", str(job_file), "--attempt", "2")
    assert second.returncode == 0, second.stderr[-3000:]
    assert json.loads(second.stdout)["output_already_committed"] is True
    metadata_after = json.loads(read_object(s3, buckets.outputs, "cli-job/cli-job.json"))
    assert metadata_after["attempt"] == 1


async def test_an_instance_action_in_imds_preempts_and_the_job_resumes(
    published_model: ModelRegistry,
    worker_settings: WorkerSettings,
    buckets: Buckets,
    imds: tuple[ImdsEmulator, str],
    tmp_path: Path,
) -> None:
    emulator, url = imds
    spec = video_job(buckets, "cli-noticed")
    job_file = tmp_path / "job.json"
    job_file.write_text(spec.canonical_json())
    env = env_with_imds(worker_settings, tmp_path, url)
    emulator.set_instance_action("terminate")

    cut = await run_worker_async(env, "run", "--job", str(job_file))
    assert cut.returncode == EXIT_PREEMPTED, cut.stderr[-3000:]
    report = json.loads(cut.stdout)
    assert report["status"] == "preempted"
    assert report["notices"][0].startswith("instance-action terminate at")
    checkpoint = report["checkpoint"]

    emulator.clear_notices()  # the job moved to a worker whose instance is not going away
    resumed = await run_worker_async(
        env,
        "run",
        "--job",
        str(job_file),
        "--attempt",
        "2",
        "--resume",
        f"s3://{buckets.checkpoints}/{checkpoint}",
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads(resumed.stdout)["resumed_from"] == checkpoint


async def test_sigterm_checkpoints_at_the_next_step_and_exits_preempted(
    published_model: ModelRegistry,
    worker_settings: WorkerSettings,
    buckets: Buckets,
    tmp_path: Path,
) -> None:
    spec = video_job(buckets, "cli-drained", steps=1000)
    job_file = tmp_path / "job.json"
    job_file.write_text(spec.canonical_json())
    log_file = tmp_path / "worker.log"
    with log_file.open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "framefleet.worker_cli",
            "run",
            "--job",
            str(job_file),
            env=worker_env(worker_settings, tmp_path / "cache"),
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
        )
        await async_wait_until(lambda: b"denoising from step 0" in log_file.read_bytes(), 120)
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(120):
            stdout, _ = await process.communicate()
    assert process.returncode == EXIT_PREEMPTED, log_file.read_text()[-3000:]
    report = json.loads(stdout)
    assert report["status"] == "preempted"
    assert 0 <= report["steps_done"] < spec.steps
    assert report["checkpoint"].endswith(f"/{report['steps_done']:06d}/manifest.json")


def test_preflight_refuses_work_without_a_gpu_unless_cpu_is_allowed(
    worker_settings: WorkerSettings, buckets: Buckets, tmp_path: Path
) -> None:
    job_file = tmp_path / "job.json"
    job_file.write_text(video_job(buckets, "no-gpu").canonical_json())
    env = worker_env(worker_settings, tmp_path / "cache") | {"FRAMEFLEET_WORKER_ALLOW_CPU": "false"}
    result = run_worker(env, "run", "--job", str(job_file))
    assert result.returncode == 2
    assert "framefleet-worker: error: preflight failed: no GPU" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_bad_job_file_is_one_clear_line(worker_settings: WorkerSettings, tmp_path: Path) -> None:
    job_file = tmp_path / "job.json"
    job_file.write_text('{"schema": "framefleet.job/v1", "job_id": "../x"}')
    result = run_worker(
        worker_env(worker_settings, tmp_path / "cache"), "run", "--job", str(job_file)
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("framefleet-worker: error: invalid job: job_id")
    )


def test_telemetry_without_a_driver(worker_settings: WorkerSettings, tmp_path: Path) -> None:
    result = run_worker(worker_env(worker_settings, tmp_path), "telemetry")
    assert result.returncode == 0
    assert result.stdout.startswith(("no NVIDIA driver", "["))


def test_warm_cache_fetches_the_model_once(
    published_model: ModelRegistry, worker_settings: WorkerSettings, tmp_path: Path
) -> None:
    env = worker_env(worker_settings, tmp_path / "warm")
    result = run_worker(env, "warm-cache", "--model", "wan/tiny-test")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("cached wan/tiny-test@r1 at ")
    cached = Path(result.stdout.split(" at ", 1)[1].strip())
    assert (cached / "model_index.json").is_file()
    unknown = run_worker(env, "warm-cache", "--model", "wan/none")
    assert unknown.returncode == 2
    assert "is not in the registry" in unknown.stderr
