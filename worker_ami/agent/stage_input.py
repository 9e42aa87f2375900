"""What a stage of a split render starts from, checked before any render session opens (in the
agent, which never imports torch or diffusers)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel.render_stage import RenderStage
from worker_ami.agent.errors import JobFault

if TYPE_CHECKING:
    from worker_ami.agent.denoise_state import DenoiseState


def stage_input_check(
    stage: RenderStage | None, resume: DenoiseState | None, embeddings: dict[str, bytes] | None
) -> None:
    """JobFault where the checkpoint found lacks what the stage starts from: the job's own
    fault (its stored input is gone), which no other machine would do better with."""
    if stage is RenderStage.DENOISE and embeddings is None:
        raise JobFault("the denoising stage found no stored prompt embeddings")
    if stage is RenderStage.DECODE and (resume is None or resume.step < resume.total_steps):
        raise JobFault("the decoding stage found no checkpoint with every step done")
