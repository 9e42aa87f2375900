"""How the runner drives one job's rendering, step by step, each call with a time bound: the
port (`RenderSession`, started by a `RenderFactory`). Its in-thread adapter is
`thread_render.ThreadRenders`, a module of its own: it imports diffusers, which an agent that
renders in child processes never loads (seconds of CPU at every worker's start).

Production renders in a child process per job (`render_process.ChildRender`): a call past its
bound kills the process, which frees the GPU at once. The in-thread adapter keeps everything in
the agent's process (for debugging, and for tests of the checkpoint logic); it reports a stall
the same way, but it cannot stop a hung thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from kernel.job_spec import JobSpec
from kernel.render_stage import RenderStage
from worker_ami.agent.denoise_state import DenoiseState
from worker_ami.agent.errors import WorkerError
from worker_ami.agent.job_inputs import NO_INPUTS, JobInputs
from worker_ami.agent.recipe import RenderRecipe

T = TypeVar("T")


class RenderStalled(WorkerError):
    """No answer within the watchdog's bound: the render was killed (or, in a thread, left)."""

    def __init__(self, what: str, bound_s: float) -> None:
        self.bound_s = bound_s
        super().__init__(f"stalled: no {what} within {bound_s:.1f} s")


class RenderDied(WorkerError):
    """The render process ended without answering (a crash in a native library, a kill)."""


@dataclass(frozen=True)
class Opened:
    step: int  # the state's step: 0, or the checkpoint's
    loaded: bool  # the model had to be loaded (False: the session held it from a job before)


class RenderSession(Protocol):
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
        """Load the pipeline (unless held), encode the prompt, start (or resume) the state.
        For a stage of a split render (`stages.open_stage`): only that stage's components,
        and the stored conditioning (`embeddings`) where it reads it. `inputs`: the job's
        input image and adapters, on local disk."""
        ...

    async def smoke(self, bound_s: float) -> None:
        """One tiny step on this device: the preflight's proof that the pipeline runs."""
        ...

    async def step(self, bound_s: float) -> int: ...

    async def checkpoint(self, bound_s: float) -> tuple[int, dict[str, bytes]]:
        """The state's step and its checkpoint blobs (`stages.stage_blobs`)."""
        ...

    async def video(self, fps: int, bound_s: float) -> tuple[bytes, int]:
        """The MP4 and its frame count."""
        ...

    async def close(self) -> None: ...


class RenderFactory(Protocol):
    async def start(self, job_id: str) -> RenderSession: ...

    async def give_back(self, session: RenderSession, model: str) -> None:
        """The job (of `model`) is done with the session: kept for the next job, or ended."""
        ...

    @property
    def warm_model(self) -> str | None:
        """The model a kept session holds loaded, if any."""
        ...

    async def warm_up(self, bound_s: float) -> None:
        """Before the worker offers its slots: start what a first job would wait for (a
        render process, its imports done), where this factory does that."""
        ...

    async def close(self) -> None:
        """Release what it keeps between jobs."""
        ...


async def bounded(call: Awaitable[T], what: str, bound_s: float) -> T:
    try:
        return await asyncio.wait_for(call, bound_s)
    except TimeoutError:
        raise RenderStalled(what, bound_s) from None
