"""The render in the agent's own process, on a worker thread: the in-thread adapter of the
render port (`render_session`). For debugging, the demo's uninterrupted twins and the tests of
the checkpoint logic; production renders in a child process per job (`render_process`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kernel.job_spec import JobSpec
from kernel.render_stage import RenderStage
from worker_ami.agent.denoise_state import DenoiseState
from worker_ami.agent.families import renderer_class
from worker_ami.agent.job_inputs import NO_INPUTS, JobInputs
from worker_ami.agent.recipe import RenderRecipe
from worker_ami.agent.render_session import Opened, RenderSession, bounded
from worker_ami.agent.renderer import Conditioning, Renderer
from worker_ami.agent.stages import open_stage, smoke_stage, stage_blobs

# A pipeline kept loaded: its model folder, recipe, and the stage it serves (None: whole).
PipelineKey = tuple[Path, RenderRecipe, RenderStage | None]


class ThreadRender:
    """The render in the agent's own process, on a worker thread."""

    def __init__(self, device: str, pipelines: dict[PipelineKey, Renderer]) -> None:
        self._device = device
        self._pipelines = pipelines  # loaded pipelines, kept across jobs
        self._renderer: Renderer | None = None
        self._spec: JobSpec | None = None
        self._stage: RenderStage | None = None
        self._prompt: Conditioning | None = None
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
        inputs: JobInputs = NO_INPUTS,
    ) -> Opened:
        key = (model_dir, recipe, stage)
        opening = asyncio.to_thread(self._open, key, spec, resume, embeddings, inputs)
        return await bounded(opening, "model load", bound_s)

    def _open(
        self,
        key: PipelineKey,
        spec: JobSpec,
        resume: DenoiseState | None,
        embeddings: dict[str, bytes] | None,
        inputs: JobInputs,
    ) -> Opened:
        model_dir, recipe, stage = key
        renderer = self._pipelines.get(key)
        loaded = renderer is None
        if renderer is None:
            renderer = renderer_class(recipe.model_family).load(
                model_dir, self._device, recipe, stage
            )
            self._pipelines[key] = renderer
        self._renderer, self._spec, self._stage = renderer, spec, stage
        self._prompt, self._state = open_stage(renderer, spec, stage, resume, embeddings, inputs)
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

    async def warm_up(self, bound_s: float) -> None:
        """Nothing to start: the agent's own process renders."""

    async def close(self) -> None:
        self._pipelines.clear()
        self._last_model = None
