"""How the runner drives one job's rendering, step by step, each call with a time bound: the
port (`RenderSession`, started by a `RenderFactory`) and its in-thread adapter.

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
from worker_ami.agent.recipe import RenderRecipe
from worker_ami.agent.renderer import PromptEmbeddings, Renderer, load_pipeline
from worker_ami.agent.stages import components_of, open_stage, smoke_stage, stage_blobs

T = TypeVar("T")
# A pipeline kept loaded: its model folder, recipe, and the stage it serves (None: whole).
PipelineKey = tuple[Path, RenderRecipe, RenderStage | None]


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
    ) -> Opened:
        """Load the pipeline (unless held), encode the prompt, start (or resume) the state.
        For a stage of a split render (`stages.open_stage`): only that stage's components,
        and the prompt's stored `embeddings` where it reads them."""
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

    async def close(self) -> None:
        """Release what it keeps between jobs."""
        ...


async def bounded(call: Awaitable[T], what: str, bound_s: float) -> T:
    try:
        return await asyncio.wait_for(call, bound_s)
    except TimeoutError:
        raise RenderStalled(what, bound_s) from None


class ThreadRender:
    """The render in the agent's own process, on a worker thread."""

    def __init__(self, device: str, pipelines: dict[PipelineKey, Renderer]) -> None:
        self._device = device
        self._pipelines = pipelines  # loaded pipelines, kept across jobs
        self._renderer: Renderer | None = None
        self._spec: JobSpec | None = None
        self._stage: RenderStage | None = None
        self._prompt: PromptEmbeddings | None = None
        self._state: DenoiseState | None = None

    async def open(
        self,
        model_dir: Path,
        recipe: RenderRecipe,
        spec: JobSpec,
        resume: DenoiseState | None,
        bound_s: float,
        stage: RenderStage | None = None,
        embeddings: dict[str, bytes] | None = None,
    ) -> Opened:
        key = (model_dir, recipe, stage)
        opening = asyncio.to_thread(self._open, key, spec, resume, embeddings)
        return await bounded(opening, "model load", bound_s)

    def _open(
        self,
        key: PipelineKey,
        spec: JobSpec,
        resume: DenoiseState | None,
        embeddings: dict[str, bytes] | None,
    ) -> Opened:
        model_dir, recipe, stage = key
        renderer = self._pipelines.get(key)
        loaded = renderer is None
        if renderer is None:
            pipe = load_pipeline(model_dir, self._device, recipe.dtypes, components_of(stage))
            renderer = Renderer(pipe, self._device, recipe)
            self._pipelines[key] = renderer
        self._renderer, self._spec, self._stage = renderer, spec, stage
        self._prompt, self._state = open_stage(renderer, spec, stage, resume, embeddings)
        return Opened(self._state.step if self._state is not None else 0, loaded)

    async def smoke(self, bound_s: float) -> None:
        await bounded(asyncio.to_thread(self._smoke), "smoke step", bound_s)

    def _smoke(self) -> None:
        assert self._renderer is not None
        assert self._spec is not None
        smoke_stage(self._renderer, self._spec, self._stage, self._prompt, self._state)

    async def step(self, bound_s: float) -> int:
        return await bounded(asyncio.to_thread(self._step), "step", bound_s)

    def _step(self) -> int:
        assert self._renderer is not None
        assert self._spec is not None
        assert self._state is not None
        assert self._prompt is not None
        self._state = self._renderer.step(self._state, self._prompt, self._spec.guidance)
        return self._state.step

    async def checkpoint(self, bound_s: float) -> tuple[int, dict[str, bytes]]:
        step = self._state.step if self._state is not None else 0
        return step, stage_blobs(self._stage, self._prompt, self._state)

    async def video(self, fps: int, bound_s: float) -> tuple[bytes, int]:
        renderer, state = self._renderer, self._state
        assert renderer is not None
        assert state is not None

        def render() -> tuple[bytes, int]:
            # Here, not at the top: a render process (which imports this port) needs no encoder.
            from worker_ami.agent.video import encode_mp4

            frames = renderer.decode(state)
            return encode_mp4(frames, fps), int(frames.shape[0])

        return await bounded(asyncio.to_thread(render), "video", bound_s)

    async def close(self) -> None:
        self._state = self._prompt = None


class ThreadRenders:
    def __init__(self, device: str) -> None:
        self._device = device
        self._pipelines: dict[PipelineKey, Renderer] = {}
        self._last_model: str | None = None

    async def start(self, job_id: str) -> RenderSession:
        return ThreadRender(self._device, self._pipelines)

    async def give_back(self, session: RenderSession, model: str) -> None:
        await session.close()  # the pipelines stay in `_pipelines`
        self._last_model = model

    @property
    def warm_model(self) -> str | None:
        return self._last_model

    async def close(self) -> None:
        self._pipelines.clear()
        self._last_model = None
