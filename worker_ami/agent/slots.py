"""The worker's GPU slots: what each GPU runs, and the GPUs a job that spans several holds
together (`gpu.count`): it runs from its lead GPU's slot with a runner of its own over all its
GPUs; the others name their lead and report no progress of their own."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from kernel.worker_protocol import Command, GpuInfo
from worker_ami.agent.runner import JobRunner


@dataclass
class Slot:
    gpu: GpuInfo
    device: str
    runner: JobRunner
    job_id: str | None = None
    attempt: int = 0
    step: int = 0
    total_steps: int = 1
    task: asyncio.Task[None] | None = None
    # A job that spans GPUs: the others' lead GPU (on each of them), the others (on the lead),
    # and the lead's own runner, which waits while the span's runs.
    lead: int | None = None
    span: list[Slot] = field(default_factory=list)
    resting: JobRunner | None = None

    def take_span(self, span: list[Slot], runner: JobRunner, job_id: str, attempt: int) -> None:
        self.span, self.resting, self.runner = span, self.runner, runner
        for other in span:
            other.lead, other.job_id, other.attempt = self.gpu.index, job_id, attempt

    async def end_span(self) -> None:
        """The job ended: its span's GPUs are free, the lead's own runner back."""
        if self.resting is None:
            return
        await self.runner.close()
        self.runner, self.resting = self.resting, None
        for other in self.span:
            other.lead, other.job_id = None, None
        self.span = []


def why_not(
    accepting: bool, slot: Slot | None, span: list[Slot], command: Command, can_span: bool
) -> str | None:
    """Why the worker refuses an assignment; None: it takes it."""
    if not accepting:
        return "worker is draining"
    if slot is None or slot.job_id is not None:
        return "GPU not free"
    if len(span) != len(command.span) or any(s.job_id is not None for s in span):
        return f"GPUs {list(command.span)} are not all free here"
    if span and not can_span:
        return "this worker renders in-thread and cannot span GPUs"
    if span and command.stage is not None:
        return "a render across GPUs runs whole, not as a stage"
    return None
