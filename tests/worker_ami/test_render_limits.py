"""What a render process is given: its share of the host, an environment without the agent's
credentials, a cgroup v2 group where one is delegated, and how its failures are classified."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kernel.clock import SystemClock
from tests.support.renders import Buckets, video_job
from worker_ami.agent.checkpoint import CheckpointStore
from worker_ami.agent.errors import JobFault
from worker_ami.agent.job_cgroup import JobCgroup, delegated_root, own_group
from worker_ami.agent.model_cache import ModelCache, ModelRegistry
from worker_ami.agent.object_store import S3ObjectStore
from worker_ami.agent.render_child import failure
from worker_ami.agent.render_limits import GIB, RenderLimits, limits_for
from worker_ami.agent.render_process import ChildRenders, child_environment
from worker_ami.agent.runner import JobRunner, RunnerSettings
from worker_ami.agent.settings import WorkerSettings


def test_a_job_gets_an_even_share_of_the_host_unless_told() -> None:
    even = limits_for(None, None, 0.9, slots=4, host_memory_bytes=64 * GIB, host_cpus=16)
    assert even.memory_bytes == int(64 * GIB * 0.9 / 4)
    assert even.threads == 4
    assert even.gpu_memory_fraction == 0.9
    told = limits_for(10.0, 2, 0.9, slots=4, host_memory_bytes=64 * GIB, host_cpus=16)
    assert (told.memory_bytes, told.threads) == (10 * GIB, 2)


def test_the_render_environment_carries_no_credentials(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("FRAMEFLEET_WORKER_MQTT_PASSWORD", "secret")
    monkeypatch.setenv("PATH", "/usr/bin")
    env = child_environment(tmp_path)
    assert "secret" not in env.values()
    assert env["PATH"] == "/usr/bin"
    assert env["TMPDIR"] == str(tmp_path)
    assert env["AWS_EC2_METADATA_DISABLED"] == "true"


def test_out_of_memory_and_job_faults_are_the_jobs_and_the_rest_the_workers() -> None:
    allocator = RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried ...")
    assert failure(MemoryError())["kind"] == "job"
    assert failure(allocator)["kind"] == "job"
    assert failure(JobFault("bad checkpoint schedule"))["kind"] == "job"
    assert failure(ValueError("a bug"))["kind"] == "worker"
    assert failure(MemoryError())["error"].startswith("out of memory")


def test_a_delegated_cgroup_v2_group_gets_a_job_group_with_its_limits(tmp_path: Path) -> None:
    mount, group = tmp_path / "cgroup", "system.slice/framefleet-worker.service"
    base = mount / group
    base.mkdir(parents=True)
    (base / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (base / "cgroup.subtree_control").write_text("")
    proc = tmp_path / "proc-cgroup"
    proc.write_text(f"0::/{group}\n")
    root = delegated_root(mount, proc)
    assert root == base
    assert (base / "cgroup.subtree_control").read_text() == "+memory +cpu"
    assert (base / "agent" / "cgroup.procs").read_text().isdigit()
    job = JobCgroup.create(root, "job-1", 3 * GIB, 100)
    assert (job.path / "memory.max").read_text() == str(3 * GIB)
    assert not job.killed_for_memory()
    (job.path / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n")
    assert job.killed_for_memory()


def test_cgroup_v1_or_no_delegation_means_resource_limits(tmp_path: Path) -> None:
    assert own_group("12:memory:/x\n0::/\n") is None
    proc = tmp_path / "proc-cgroup"
    proc.write_text("0::/system.slice/x.service\n")
    assert delegated_root(tmp_path / "no-mount", proc) is None


async def test_a_preflight_that_refuses_the_job_ends_its_render_process(
    object_store: S3ObjectStore,
    published_model: ModelRegistry,
    worker_settings: WorkerSettings,
    buckets: Buckets,
    tmp_path: Path,
) -> None:
    renders = ChildRenders("cpu", RenderLimits(threads=1), tmp_path / "scratch")
    runner = JobRunner(
        object_store,
        CheckpointStore(object_store, buckets.checkpoints),
        ModelCache(object_store, worker_settings.cache_dir, 10**10, SystemClock()),
        published_model,
        SystemClock(),
        RunnerSettings(),
        renders,
    )
    assert await runner.prepare(video_job(buckets, "refused")) == (None, None)
    folders = set((tmp_path / "scratch").iterdir())  # the job's process's (and a spare's)
    assert folders
    await runner.release(keep_warm=False)  # as a refused preflight does
    assert len(folders - set((tmp_path / "scratch").iterdir())) == 1  # the job's is gone
    await runner.close()  # and the spare's, once the runner is done with
    assert list((tmp_path / "scratch").iterdir()) == []


async def test_a_warm_start_gives_the_first_job_the_process_started_before_it(
    tmp_path: Path,
) -> None:
    renders = ChildRenders(
        "cpu", RenderLimits(threads=1), tmp_path / "scratch", spare=False, warm_start=True
    )
    try:
        # Slots sharing a GPU share its factory, and the worker warms them up together.
        await asyncio.gather(renders.warm_up(120.0), renders.warm_up(120.0))
        started = set((tmp_path / "scratch").iterdir())  # the process's own folder
        assert len(started) == 1
        session = await renders.start("first")
        assert set((tmp_path / "scratch").iterdir()) == started  # no other process started
        await session.close()
    finally:
        await renders.close()


async def test_without_a_warm_start_no_process_runs_before_a_job(tmp_path: Path) -> None:
    renders = ChildRenders("cpu", RenderLimits(threads=1), tmp_path / "scratch", spare=False)
    await renders.warm_up(120.0)
    assert not (tmp_path / "scratch").exists() or not any((tmp_path / "scratch").iterdir())
    await renders.close()
