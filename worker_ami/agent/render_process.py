"""The render in a child process per job (`render_child`), as production runs it.

Each job gets its own process with a memory limit and a CPU share (a cgroup v2 group where the
agent was delegated one, resource limits otherwise; on a GPU also a CUDA memory fraction), a
temp directory of its own (removed with the process), and an environment that carries nothing
of the agent's credentials: the child never talks to S3, MQTT or IMDS, the agent does. A call
past its bound, a cancel, a drain or the end of the job kills the process, which frees the GPU
at once. Its death is classified: a kill at the memory limit is the job's fault; anything else
(a segfault in a native library, an unexpected kill) is the worker's, so the job is retried
elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel.job_spec import JobSpec
from kernel.render_stage import RenderStage
from worker_ami.agent.denoise_state import DenoiseState
from worker_ami.agent.errors import JobFault, WorkerError
from worker_ami.agent.gpus import process_device
from worker_ami.agent.job_cgroup import JobCgroup
from worker_ami.agent.job_inputs import NO_INPUTS, JobInputs
from worker_ami.agent.recipe import RenderRecipe
from worker_ami.agent.render_limits import RenderLimits
from worker_ami.agent.render_session import Opened, RenderDied, RenderSession, RenderStalled
from worker_ami.agent.state_codec import encode_state

if TYPE_CHECKING:
    from worker_ami.agent.context_parallel import Span

log = logging.getLogger(__name__)
# What a render process may see of the agent's environment: how to run Python and find
# libraries, the locale and the GPUs. Nothing else (no AWS_*, no MQTT password).
KEPT_ENVIRONMENT = (
    "PATH",
    "LANG",
    "LC_ALL",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "LD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "HOME",
    # Where compiled kernels are kept between processes (the worker's `compile_cache_dir`).
    "TORCHINDUCTOR_CACHE_DIR",
    "TRITON_CACHE_DIR",
)
MAX_REPLY_BYTES = 64 * 1024
STOP_GRACE_S = 5.0
RESET_BOUND_S = 30.0
# A warm render process serves at most this many jobs, then a fresh one replaces it (whatever
# a long-lived process accumulates, fragmentation or a leak in a library, stays bounded).
DEFAULT_REUSE_JOBS = 20


def child_environment(scratch: Path) -> dict[str, str]:
    kept = {name: os.environ[name] for name in KEPT_ENVIRONMENT if name in os.environ}
    return kept | {
        "TMPDIR": str(scratch),
        "HF_HUB_OFFLINE": "1",  # models come from the cache, never a hub
        "AWS_EC2_METADATA_DISABLED": "true",
        "PYTHONUNBUFFERED": "1",
    }


def _scratch_folder(root: Path) -> Path:
    """Absolute: the render process runs inside it, so a relative path would point elsewhere."""
    root = root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="job-", dir=root))


class ChildRender:
    def __init__(
        self, process: asyncio.subprocess.Process, scratch: Path, cgroup: JobCgroup | None
    ) -> None:
        self._process, self._scratch, self._cgroup = process, scratch, cgroup
        self.hooks: dict[str, Any] = {}  # the job's test hooks (render_test_hooks), if any
        self.pid = process.pid
        self.jobs_opened = 0
        # A call whose reply has not been read (cancelled midway): the pipe is out of step,
        # so the process can serve no other job.
        self._in_call = False

    @classmethod
    async def start(
        cls,
        device: str,
        limits: RenderLimits,
        scratch_root: Path,
        cgroups_root: Path | None,
        span: Span | None = None,
    ) -> ChildRender:
        """`span`: the process's place in a render across several GPUs (spanned_render.py)."""
        scratch = await asyncio.to_thread(_scratch_folder, scratch_root)
        device, visible = process_device(device)
        arguments = ["--device", device]
        if span is not None:
            arguments += [
                "--span-processes",
                str(span.processes),
                "--span-rank",
                str(span.rank),
                "--span-rendezvous",
                span.rendezvous,
            ]
        if limits.memory_bytes is not None:
            arguments += ["--memory-bytes", str(limits.memory_bytes)]
        if limits.threads is not None:
            arguments += ["--threads", str(limits.threads)]
        if limits.gpu_memory_fraction is not None and device.startswith("cuda"):
            arguments += ["--gpu-memory-fraction", str(limits.gpu_memory_fraction)]
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "worker_ami.agent.render_child",
            *arguments,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=None,
            env=child_environment(scratch) | visible,
            cwd=scratch,
            limit=MAX_REPLY_BYTES,
        )
        cgroup = None
        if cgroups_root is not None:
            cgroup = JobCgroup.create(
                cgroups_root, scratch.name, limits.memory_bytes, limits.cpu_weight
            )
            cgroup.adopt(process.pid)
        return cls(process, scratch, cgroup)

    @property
    def alive(self) -> bool:
        return self._process.returncode is None

    @property
    def reusable(self) -> bool:
        """Alive and between calls: it may serve another job after a reset."""
        return self.alive and not self._in_call

    async def ready(self, bound_s: float) -> None:
        """Returns once the process has done its imports and reads requests."""
        await self._call({"op": "ready"}, "start", bound_s)

    async def reset(self) -> None:
        """Forget the job (state, prompt, hooks, its files), keep the pipeline."""
        await self._call({"op": "reset"}, "reset", RESET_BOUND_S)
        for entry in await asyncio.to_thread(lambda: list(self._scratch.iterdir())):
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)

    async def open(
        self,
        model_dir: Path,
        recipe: RenderRecipe,
        spec: JobSpec,
        resume: DenoiseState | None,
        bound_s: float,
        stage: RenderStage | None = None,
        embeddings: dict[str, bytes] | None = None,
        inputs: JobInputs = NO_INPUTS,
    ) -> Opened:
        self.jobs_opened += 1
        resume_dir = None
        blobs = {**(encode_state(resume) if resume is not None else {}), **(embeddings or {})}
        if blobs:
            folder = self._scratch / "resume"
            folder.mkdir()
            for name, blob in blobs.items():
                (folder / name).write_bytes(blob)
            resume_dir = str(folder)
        # The model cache's paths are absolute (the render process runs in its temp directory).
        request = {
            "op": "open",
            "model_dir": str(model_dir),
            "recipe": recipe.model_dump_json(),
            "spec": spec.canonical_json(),
            "resume_dir": resume_dir,
            "stage": stage.value if stage is not None else None,
            "hooks": self.hooks,
            "inputs": inputs.to_wire(),
        }
        reply = await self._call(request, "model load", bound_s)
        return Opened(step=int(reply["step"]), loaded=bool(reply.get("loaded", True)))

    async def smoke(self, bound_s: float) -> None:
        await self._call({"op": "smoke"}, "smoke step", bound_s)

    async def step(self, bound_s: float) -> int:
        return int((await self._call({"op": "step"}, "step", bound_s))["step"])

    async def checkpoint(self, bound_s: float) -> tuple[int, dict[str, bytes]]:
        folder = self._scratch / "state"
        shutil.rmtree(folder, ignore_errors=True)
        reply = await self._call({"op": "save", "dir": str(folder)}, "checkpoint", bound_s)
        return int(reply["step"]), {path.name: path.read_bytes() for path in folder.iterdir()}

    async def video(self, fps: int, bound_s: float) -> tuple[bytes, int]:
        path = self._scratch / "video.mp4"
        reply = await self._call({"op": "video", "path": str(path), "fps": fps}, "video", bound_s)
        return path.read_bytes(), int(reply["frames"])

    async def close(self) -> None:
        """End the process (at once: its state is in the last checkpoint or not wanted) and
        remove its temp directory and group."""
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._process.wait(), STOP_GRACE_S)
        shutil.rmtree(self._scratch, ignore_errors=True)
        if self._cgroup is not None:
            self._cgroup.remove()

    async def _call(self, request: dict[str, Any], what: str, bound_s: float) -> dict[str, Any]:
        process = self._process
        assert process.stdin is not None
        assert process.stdout is not None
        self._in_call = True
        try:
            process.stdin.write(json.dumps(request).encode() + b"\n")
            await process.stdin.drain()
            line = await asyncio.wait_for(process.stdout.readline(), bound_s)
            self._in_call = False
        except TimeoutError:
            log.warning(
                "render process %d: no %s within %.1f s; killing it", self.pid, what, bound_s
            )
            await self.close()
            raise RenderStalled(what, bound_s) from None
        except (ConnectionError, ValueError):  # a pipe closed by a dead process, a huge line
            line = b""
        if not line:
            raise await self._death(what)
        reply: dict[str, Any] = json.loads(line)
        if reply.get("ok") is True:
            return reply
        error = str(reply.get("error", "no reason given"))
        raise JobFault(error) if reply.get("kind") == "job" else WorkerError(error)

    async def _death(self, what: str) -> WorkerError:
        code = await self._process.wait()
        if self._cgroup is not None and self._cgroup.killed_for_memory():
            return JobFault(f"out of memory: killed at the job's memory limit during {what}")
        if code < 0:
            name = signal.Signals(-code).name
            return RenderDied(f"render process died of {name} during {what}")
        return RenderDied(f"render process exited with status {code} during {what}")


class ChildRenders:
    """Starts a render process per job, or gives the job the warm one: the process the last job
    on this GPU ended in cleanly, its pipeline still loaded (a job of the same model starts
    without a load; one of another model frees it first). A process that failed, stalled or
    was stopped mid-call is never reused, nor one that served `reuse_jobs` jobs. With `spare`,
    one more process waits, its imports done, for a job when no warm one is there."""

    def __init__(
        self,
        device: str,
        limits: RenderLimits,
        scratch_root: Path,
        hooks: dict[str, dict[str, Any]] | None = None,
        cgroups_root: Path | None = None,
        spare: bool = True,
        reuse_jobs: int = DEFAULT_REUSE_JOBS,
        warm_start: bool = False,
    ) -> None:
        self._device, self._limits, self._scratch_root = device, limits, scratch_root
        self._hooks, self._cgroups_root = hooks or {}, cgroups_root
        self._keep_spare = spare
        self._warm_start = warm_start
        # Slots that share a GPU share this factory: their warm-ups start one process.
        self._warming = asyncio.Lock()
        self._reuse_jobs = reuse_jobs
        self._spare: asyncio.Task[ChildRender] | None = None
        self._warm: ChildRender | None = None
        self._warm_model: str | None = None

    @property
    def warm_model(self) -> str | None:
        return self._warm_model if self._warm is not None and self._warm.alive else None

    def _start_one(self) -> asyncio.Task[ChildRender]:
        start = ChildRender.start(
            self._device, self._limits, self._scratch_root, self._cgroups_root
        )
        return asyncio.create_task(start)

    async def start(self, job_id: str) -> RenderSession:
        session, self._warm, self._warm_model = self._warm, None, None
        if session is None or not session.alive:
            if session is not None:
                await session.close()
            session = await self._from_spare()
        session.hooks = self._hooks.get(job_id, {})
        if self._keep_spare and self._spare is None:
            self._spare = self._start_one()
        return session

    async def warm_up(self, bound_s: float) -> None:
        """With `warm_start`: the first job's process, started now and its imports done, so
        the job pays only its model's load. It waits as the warm process does, holding no
        model. A process that does not come up is left to the first job to start again (and
        to fail it, if it must)."""
        async with self._warming:
            if not self._warm_start or self._spare is not None or self._warm is not None:
                return
            started: ChildRender | None = None
            try:
                started = await self._start_one()
                await started.ready(bound_s)
            except (WorkerError, OSError) as error:
                log.warning("no render process ready ahead of the first job: %s", error)
                if started is not None:
                    await started.close()
                return
            self._warm, self._warm_model = started, None

    async def _from_spare(self) -> ChildRender:
        spare, self._spare = self._spare, None
        session = await spare if spare is not None else None
        if session is None or not session.alive:
            if session is not None:
                await session.close()
            session = await self._start_one()
        return session

    async def give_back(self, session: RenderSession, model: str) -> None:
        """The job is done with `session`: kept warm for the next job if it is healthy and
        young enough, else ended."""
        if not isinstance(session, ChildRender):
            await session.close()
            return
        if session.reusable and session.jobs_opened < self._reuse_jobs:
            try:
                await session.reset()
            except WorkerError as error:
                log.warning("render process %d not kept warm: %s", session.pid, error)
            else:
                previous, self._warm, self._warm_model = self._warm, session, model
                if previous is not None:
                    await previous.close()
                return
        await session.close()

    async def close(self) -> None:
        """End the warm process and the spare (the agent is stopping)."""
        warm, self._warm, self._warm_model = self._warm, None, None
        if warm is not None:
            await warm.close()
        spare, self._spare = self._spare, None
        if spare is not None:
            await (await spare).close()
