"""The render process: one job's pipeline and denoising state in a process of its own.

`python -m worker_ami.agent.render_child` reads one JSON request per line on stdin and writes
one JSON reply per line on its original stdout (libraries that print are sent to stderr). The
agent (`render_process.ChildRender`) starts it per job with its limits, a temp directory of its
own and an environment without the agent's credentials; the child never talks to S3, MQTT or
IMDS. Tensors cross only as safetensors files in the job's temp directory (nothing is ever
unpickled). A crash, an out-of-memory or a leak here ends this process alone.

Requests: `open` (load the pipeline unless this process holds it already, encode the prompt,
start or resume the state), `smoke` (one tiny step, the preflight), `step`, `save` (the state to
files), `video` (decode and encode the MP4 to a file), `reset` (forget the job, keep the
pipeline for the next job of the same model), `ready` (nothing: its reply says the imports are
done). Replies: `{"ok": true, "step": n}` (`open` adds
`"loaded"`: whether it had to load the model) or `{"ok": false, "kind": "job" | "worker",
"error": "..."}`.

A process serves consecutive jobs of a model with the pipeline kept on its GPU (the agent's
`ChildRenders` decides when: never after a fault, at most `render_reuse_jobs` jobs). Each job's
state, prompt and hooks are dropped at `reset`; a job of another model frees the pipeline
before it loads its own.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import signal
import sys
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from worker_ami.agent.context_parallel import Span

PR_SET_PDEATHSIG = 1
OUT_OF_MEMORY = ("can't allocate memory", "out of memory", "cannot allocate memory")


def _die_with_parent() -> None:
    """An agent killed outright takes its render processes with it (Linux only)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def apply_limits(memory_bytes: int | None, threads: int | None) -> None:
    """The job's memory limit as RLIMIT_DATA (heap and private writable mappings: what the
    CPU allocator uses; unlike RLIMIT_AS it leaves the GPU driver's address-space
    reservations alone), and its share of the CPUs as a thread count."""
    if memory_bytes is not None:
        resource.setrlimit(resource.RLIMIT_DATA, (memory_bytes, memory_bytes))
    if threads is not None:
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[name] = str(threads)


class RenderWork:
    """The state of one job inside the render process."""

    def __init__(
        self,
        device: str,
        threads: int | None,
        gpu_fraction: float | None,
        span: Span | None = None,
    ) -> None:
        import torch

        if threads is not None:
            torch.set_num_threads(threads)
        if device.startswith("cuda") and gpu_fraction is not None:
            torch.cuda.set_per_process_memory_fraction(gpu_fraction, torch.device(device))
        self._device = device
        # This process's place in a render across several GPUs (None: the job's only one).
        # Such a process serves that one job: its transformer is split for that group.
        self._span = span
        self._renderer: Any = None
        # (model folder, recipe, stage) of the pipeline it holds
        self._loaded: tuple[str, str, Any] | None = None
        self._stage: Any = None  # the stage of a split render it runs (None: whole)
        self._state: Any = None
        self._prompt: Any = None
        self._spec: Any = None
        self._hooks: dict[str, Any] = {}
        self._held: bytearray | None = None  # the memory hook's allocation

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "open":
            return self._open(request)
        if op == "smoke":
            return self._smoke()
        if op == "step":
            return self._step()
        if op == "save":
            return self._save(Path(request["dir"]))
        if op == "video":
            return self._video(Path(request["path"]), int(request["fps"]))
        if op == "reset":
            return self._reset()
        if op == "ready":  # read once the imports are done: the agent's warm start waits on it
            return {"ok": True, "step": 0}
        raise ValueError(f"unknown request {op!r}")

    def _open(self, request: dict[str, Any]) -> dict[str, Any]:
        from kernel.job_spec import parse_job
        from kernel.render_stage import RenderStage
        from worker_ami.agent.job_inputs import JobInputs
        from worker_ami.agent.stages import open_stage
        from worker_ami.agent.state_codec import EMBEDDINGS, decode_state

        self._reset()
        self._spec = parse_job(request["spec"], now=None)
        self._hooks = dict(request.get("hooks") or {})
        self._stage = RenderStage(request["stage"]) if request.get("stage") else None
        loaded = self._load(str(request["model_dir"]), str(request["recipe"]), self._stage)
        resume_dir = request.get("resume_dir")
        blobs = {p.name: p.read_bytes() for p in Path(resume_dir).iterdir()} if resume_dir else {}
        embeddings = {EMBEDDINGS: blobs.pop(EMBEDDINGS)} if EMBEDDINGS in blobs else None
        resume = decode_state(blobs) if blobs else None
        inputs = JobInputs.from_wire(request.get("inputs"))
        self._prompt, self._state = open_stage(
            self._renderer, self._spec, self._stage, resume, embeddings, inputs
        )
        step = self._state.step if self._state is not None else 0
        return {"ok": True, "step": step, "loaded": loaded}

    def _load(self, model_dir: str, recipe_json: str, stage: Any) -> bool:
        """The pipeline for this model, recipe and stage (None: whole): the one held (False),
        or loaded (True) after the one held, if any, is freed."""
        from worker_ami.agent.families import renderer_class
        from worker_ami.agent.recipe import RenderRecipe

        if self._loaded == (model_dir, recipe_json, stage):
            return False
        recipe = RenderRecipe.model_validate_json(recipe_json)
        self._renderer, self._loaded = None, None
        self._free_device_memory()
        renderer = renderer_class(recipe.model_family).load(
            Path(model_dir), self._device, recipe, stage
        )
        if self._span is not None:
            from worker_ami.agent.context_parallel import join, span_transformer

            join(self._span, self._device)
            span_transformer(renderer.pipe, self._span, self._device)
        self._renderer = renderer
        self._loaded = (model_dir, recipe_json, stage)
        return True

    def _free_device_memory(self) -> None:
        import gc

        import torch

        gc.collect()
        if self._device.startswith("cuda"):
            torch.cuda.empty_cache()

    def _reset(self) -> dict[str, Any]:
        self._state = self._prompt = self._spec = self._held = self._stage = None
        self._hooks = {}
        return {"ok": True, "step": 0}

    def _smoke(self) -> dict[str, Any]:
        from worker_ami.agent.stages import smoke_stage

        smoke_stage(self._renderer, self._spec, self._stage, self._prompt, self._state)
        return {"ok": True, "step": self._step_now()}

    def _step_now(self) -> int:
        return self._state.step if self._state is not None else 0

    def _step(self) -> dict[str, Any]:
        self._test_hooks(self._state.step)
        self._state = self._renderer.step(self._state, self._prompt, self._spec.guidance)
        return {"ok": True, "step": self._state.step}

    def _save(self, folder: Path) -> dict[str, Any]:
        from worker_ami.agent.stages import stage_blobs

        folder.mkdir(parents=True, exist_ok=True)
        for name, blob in stage_blobs(self._stage, self._prompt, self._state).items():
            (folder / name).write_bytes(blob)
        return {"ok": True, "step": self._step_now()}

    def _video(self, path: Path, fps: int) -> dict[str, Any]:
        from worker_ami.agent.video import encode_mp4

        frames = self._renderer.decode(self._state)
        path.write_bytes(encode_mp4(frames, fps))
        return {"ok": True, "step": self._state.step, "frames": int(frames.shape[0])}

    def _test_hooks(self, step: int) -> None:
        """Faults on demand, for the isolation tests; the agent passes hooks only when its
        `render_test_hooks` setting names a file of them (never in production)."""
        hooks = self._hooks
        if hooks.get("block_at_step") == step:
            while True:  # a hung kernel: no step, no reply, until the watchdog kills us
                time.sleep(3600)
        if hooks.get("allocate_gib_at_step") == step:
            gib = float(hooks.get("allocate_gib", 64))
            self._held = bytearray(int(gib * 2**30))  # past any sane limit
        if hooks.get("segfault_at_step") == step:
            ctypes.string_at(0)


def failure(error: BaseException) -> dict[str, Any]:
    """A job fault (the job cannot succeed: bad input, its own memory) or the worker's."""
    from worker_ami.agent.errors import JobFault

    text = f"{type(error).__name__}: {error}"[:2000]
    lowered = str(error).lower()
    if isinstance(error, MemoryError) or any(mark in lowered for mark in OUT_OF_MEMORY):
        return {"ok": False, "kind": "job", "error": f"out of memory: {text}"}
    kind = "job" if isinstance(error, JobFault) else "worker"
    return {"ok": False, "kind": kind, "error": text}


def serve(requests: IO[str], replies: IO[str], work: RenderWork) -> None:
    for line in requests:
        try:
            reply = work.handle(json.loads(line))
        except Exception as error:  # every failure is reported, then the process ends
            replies.write(json.dumps(failure(error)) + "\n")
            replies.flush()
            return
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="render_child")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--memory-bytes", type=int)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--gpu-memory-fraction", type=float)
    parser.add_argument("--span-processes", type=int)
    parser.add_argument("--span-rank", type=int)
    parser.add_argument("--span-rendezvous")
    args = parser.parse_args(argv)
    span = None
    if args.span_processes:  # a render across several GPUs: torch.distributed comes with it
        from worker_ami.agent.context_parallel import Span

        span = Span(args.span_processes, args.span_rank, args.span_rendezvous)
    _die_with_parent()
    apply_limits(args.memory_bytes, args.threads)
    # The protocol owns the original stdout; anything a library prints goes to stderr.
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    try:
        work = RenderWork(args.device, args.threads, args.gpu_memory_fraction, span)
        # The heavy imports now, while this process may still be a spare waiting for a job.
        import worker_ami.agent.renderer
        import worker_ami.agent.state_codec  # noqa: F401
    except Exception as error:  # the agent hears why it could not start
        replies.write(json.dumps(failure(error)) + "\n")
        replies.flush()
        return
    serve(sys.stdin, replies, work)


if __name__ == "__main__":
    main()
