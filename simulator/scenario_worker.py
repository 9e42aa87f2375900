"""A simulated worker for the scenario of everything at once (`scenario.py`): the simulated
worker of the fleet simulation (the real protocol, the agent's checkpoint policy), with the
slots a real worker offers (whole GPUs, turns on a shared GPU, MIG slices), spanned renders
over several of its GPUs, and the stages of a split render.

A stage attempt runs the stage's share of the render (`STAGE_SHARE`) and reports `stage_done`
with the checkpoint the next stage starts from; a spanned attempt holds its other GPUs until it
ends. Rendering is time passing, as in `workers.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from kernel.market import mig_family
from kernel.render_stage import RenderStage
from kernel.worker_protocol import Command, CommandKind, EventKind, GpuInfo
from simulator.worker_model import Attempt
from simulator.workers import SimulatedWorker

# Of a render's work, what each stage takes (denoising is nearly all of it).
STAGE_SHARE = {RenderStage.ENCODE: 0.05, RenderStage.DENOISE: 0.9, RenderStage.DECODE: 0.05}


@dataclass(frozen=True)
class SlotLayout:
    """How a worker offers its instance's GPUs: whole, `shares` turns on each, or MIG."""

    shares: int = 1
    mig_slices: tuple[int, ...] = ()  # compute slices of each MIG instance of every GPU

    def slots(self, family: str, vram_gib: float, gpus: int) -> tuple[GpuInfo, ...]:
        found: list[GpuInfo] = []
        for physical in range(gpus):
            if self.mig_slices:
                total = sum(self.mig_slices)
                for slices in self.mig_slices:
                    found.append(
                        GpuInfo(
                            index=len(found),
                            family=mig_family(family, slices),
                            vram_gib=vram_gib * slices / 8,
                            physical=physical,
                            compute_share=slices / max(total, 7),
                        )
                    )
            elif self.shares > 1:
                for _ in range(self.shares):
                    found.append(
                        GpuInfo(
                            index=len(found),
                            family=family,
                            vram_gib=vram_gib / self.shares,
                            physical=physical,
                            compute_share=1 / self.shares,
                            time_shared=True,
                        )
                    )
            else:
                found.append(GpuInfo(index=len(found), family=family, vram_gib=vram_gib))
        return tuple(found)


@dataclass
class ScenarioWorker(SimulatedWorker):
    layout: SlotLayout = field(default_factory=SlotLayout)
    family: str = ""
    gpu_vram_gib: float = 0.0
    physical_gpus: int = 1
    stages: dict[tuple[str, int], RenderStage] = field(default_factory=dict)
    spans: dict[int, tuple[int, ...]] = field(default_factory=dict)  # lead -> its other GPUs

    def slots(self) -> tuple[GpuInfo, ...]:
        return self.layout.slots(self.family, self.gpu_vram_gib, self.physical_gpus)

    def on_command(self, command: Command, now: datetime) -> None:
        lead = command.gpu_index or 0
        if command.kind is CommandKind.ASSIGN and command.attempt is not None:
            held = {gpu for span in self.spans.values() for gpu in span}
            if lead in held or any(gpu in self.jobs or gpu in held for gpu in command.span):
                self._refuse(command, now, "a GPU of its span is busy")
                return
            if command.stage is not None:
                self.stages[(command.job_id or "", command.attempt)] = command.stage
        super().on_command(command, now)
        if command.kind is CommandKind.ASSIGN and command.span and lead in self.jobs:
            self.spans[lead] = tuple(command.span)

    def _next_event(self, job: Attempt) -> float:
        share = self._share(job)
        if share >= 1.0:
            return super()._next_event(job)
        total = job.spec.steps * self.model.step_seconds * share
        return job.stall_seconds + total - (job.done_seconds - job.started_done)

    def _share(self, job: Attempt) -> float:
        stage = self.stages.get((job.spec.job_id, job.attempt))
        return 1.0 if stage is None else STAGE_SHARE[stage]

    def run(self, start: datetime, seconds: float) -> None:
        for job in list(self.jobs.values()):
            share = self._share(job)
            if share < 1.0:  # a stage: its share of the render, then `stage_done`
                self._run_stage(job, seconds, share, start)
            else:
                self._run_attempt(job, start, seconds)
        self.spans = {lead: span for lead, span in self.spans.items() if lead in self.jobs}

    def _run_stage(self, job: Attempt, seconds: float, share: float, start: datetime) -> None:
        if job.stall_seconds > 0:
            spent = min(job.stall_seconds, seconds)
            job.stall_seconds -= spent
            seconds -= spent
        job.done_seconds += seconds
        done = job.done_seconds - job.started_done  # a stage starts where the last one ended
        if done < job.spec.steps * self.model.step_seconds * share - 1e-6:
            return
        stage = self.stages.pop((job.spec.job_id, job.attempt))
        if stage is RenderStage.DECODE:
            self._finish(job, start)
            return
        del self.jobs[job.gpu]
        step = job.spec.steps if stage is RenderStage.DENOISE else 0
        self._event(
            start,
            EventKind.STAGE_DONE,
            job_id=job.spec.job_id,
            attempt=job.attempt,
            step=step,
            checkpoint=self._key(job, step),
            outcome=True,
        )
