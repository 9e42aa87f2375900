"""The complete state of a denoising run between two steps: what a checkpoint must hold for a
resumed run to continue bit for bit."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DenoiseState:
    step: int  # steps completed
    total_steps: int
    latents: torch.Tensor
    generator_state: torch.Tensor  # torch.Generator.get_state(), a uint8 tensor
    sigmas: torch.Tensor  # the scheduler's schedule, checked on resume
    timesteps: torch.Tensor
    # The expert that denoises the next step (Wan 2.2's high-noise 0, low-noise 1; 0 for a
    # family of one transformer): recorded so that a resume across the switch is checked.
    expert: int = 0

    @property
    def done(self) -> bool:
        return self.step >= self.total_steps
