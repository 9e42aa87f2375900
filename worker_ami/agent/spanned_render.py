"""A job's render across several GPUs of this instance: a render process per GPU, started
together and driven in lockstep. Every request goes to every process at once (each step's
attention needs all of them), and the first process's reply is the job's: it alone writes the
checkpoints and the video. A failure or stall of one process fails them all: the job resumes
from its last checkpoint, as after any other failure."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

from kernel.job_spec import JobSpec
from kernel.render_stage import RenderStage
from worker_ami.agent.context_parallel import Span, SpanKind
from worker_ami.agent.denoise_state import DenoiseState
from worker_ami.agent.errors import WorkerError
from worker_ami.agent.job_inputs import NO_INPUTS, JobInputs
from worker_ami.agent.recipe import RenderRecipe
from worker_ami.agent.render_limits import RenderLimits
from worker_ami.agent.render_process import ChildRender
from worker_ami.agent.render_session import Opened, RenderSession

Reply = TypeVar("Reply")


class SpannedRender:
    """A RenderSession (render_session.py) over several render processes."""

    def __init__(self, processes: Sequence[ChildRender]) -> None:
        self._processes = list(processes)

    @classmethod
    async def start(
        cls,
        devices: Sequence[str],
        limits: RenderLimits,
        scratch_root: Path,
        cgroups_root: Path | None,
        rendezvous: str,
        kind: SpanKind = "ulysses",
    ) -> SpannedRender:
        """One process per device; they meet at `rendezvous` (host:port) when they load."""
        started = await asyncio.gather(
            *(
                ChildRender.start(
                    device,
                    limits,
                    scratch_root,
                    cgroups_root,
                    Span(len(devices), rank, rendezvous, kind),
                )
                for rank, device in enumerate(devices)
            ),
            return_exceptions=True,
        )
        processes = [p for p in started if isinstance(p, ChildRender)]
        failed = [p for p in started if isinstance(p, BaseException)]
        if failed:
            await asyncio.gather(*(p.close() for p in processes))
            raise failed[0]
        return cls(processes)

    @property
    def alive(self) -> bool:
        return all(p.alive for p in self._processes)

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
        if stage is not None:  # the worker refuses such an assignment first (`slots.why_not`)
            raise WorkerError("a render across GPUs runs whole, not as a stage")
        return await self._all(
            lambda p: p.open(model_dir, recipe, spec, resume, bound_s, inputs=inputs)
        )

    async def smoke(self, bound_s: float) -> None:
        await self._all(lambda p: p.smoke(bound_s))

    async def step(self, bound_s: float) -> int:
        return await self._all(lambda p: p.step(bound_s))

    # Saving and decoding need no other process (no collective outside the transformer): the
    # first process does them alone.

    async def checkpoint(self, bound_s: float) -> tuple[int, dict[str, bytes]]:
        """The first process's state: every process holds the same."""
        return await self._first(lambda p: p.checkpoint(bound_s))

    async def video(self, fps: int, bound_s: float) -> tuple[bytes, int]:
        return await self._first(lambda p: p.video(fps, bound_s))

    async def close(self) -> None:
        await asyncio.gather(*(p.close() for p in self._processes))

    async def _all(self, call: Callable[[ChildRender], Awaitable[Reply]]) -> Reply:
        """`call` on every process at once; the first one's reply. One failing ends them all
        (the others would wait for it in their next collective)."""
        calls = [asyncio.ensure_future(call(p)) for p in self._processes]
        done, waiting = await asyncio.wait(calls, return_when=asyncio.FIRST_EXCEPTION)
        failed = next((c.exception() for c in done if c.exception() is not None), None)
        if failed is not None:
            # The others cannot finish without it (NCCL may hang rather than fail): they end
            # now, not at their bound.
            for pending in waiting:
                pending.cancel()
            await asyncio.gather(*waiting, return_exceptions=True)
            await self.close()
            raise failed
        return calls[0].result()

    async def _first(self, call: Callable[[ChildRender], Awaitable[Reply]]) -> Reply:
        try:
            return await call(self._processes[0])
        except BaseException:
            await self.close()
            raise


class SpannedRenders:
    """The render factory of a job that spans `devices` (a RenderFactory, render_session.py):
    each job starts its own processes, which end with it (a span is not kept warm: the next
    job on these GPUs may span them otherwise, or not at all)."""

    def __init__(
        self,
        devices: Sequence[str],
        limits: RenderLimits,
        scratch_root: Path,
        cgroups_root: Path | None,
        rendezvous: Callable[[], str],
        kind: SpanKind = "ulysses",
    ) -> None:
        """`rendezvous`: a free host:port for each job's processes to meet at."""
        self._devices = list(devices)
        self._limits, self._scratch, self._cgroups = limits, scratch_root, cgroups_root
        self._rendezvous, self._kind = rendezvous, kind

    async def start(self, job_id: str) -> SpannedRender:
        return await SpannedRender.start(
            self._devices,
            self._limits,
            self._scratch,
            self._cgroups,
            self._rendezvous(),
            self._kind,
        )

    async def warm_up(self, bound_s: float) -> None:
        """Nothing ahead of a job: a span's processes start together, for that job."""

    async def give_back(self, session: RenderSession, model: str) -> None:
        await session.close()

    @property
    def warm_model(self) -> str | None:
        return None

    async def close(self) -> None:
        return None
