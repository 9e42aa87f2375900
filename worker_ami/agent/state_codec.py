"""A denoising state as checkpoint blobs and back: safetensors only, so reading a checkpoint
can never execute code. The render process (which never talks to S3) and the checkpoint store
share it."""

from __future__ import annotations

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from worker_ami.agent.denoise_state import DenoiseState
from worker_ami.agent.errors import CheckpointRejected

LATENTS, SCHEDULER, RNG = "latents.safetensors", "scheduler.safetensors", "rng.safetensors"
BLOB_NAMES = (LATENTS, SCHEDULER, RNG)
# The prompt's embeddings, in the checkpoints of a render split into stages (`stages.py`).
EMBEDDINGS = "embeddings.safetensors"


def encode_state(state: DenoiseState) -> dict[str, bytes]:
    return {
        LATENTS: save_tensors({"latents": state.latents.contiguous()}),
        SCHEDULER: save_tensors(
            {
                "step": torch.tensor([state.step], dtype=torch.int64),
                "total_steps": torch.tensor([state.total_steps], dtype=torch.int64),
                "sigmas": state.sigmas.contiguous(),
                "timesteps": state.timesteps.contiguous(),
                "expert": torch.tensor([state.expert], dtype=torch.int64),
            }
        ),
        RNG: save_tensors({"generator_state": state.generator_state.contiguous()}),
    }


def decode_state(blobs: dict[str, bytes]) -> DenoiseState:
    try:
        latents = load_tensors(blobs[LATENTS])["latents"]
        scheduler = load_tensors(blobs[SCHEDULER])
        rng = load_tensors(blobs[RNG])["generator_state"]
        step, total = int(scheduler["step"][0]), int(scheduler["total_steps"][0])
        sigmas, timesteps = scheduler["sigmas"], scheduler["timesteps"]
        # Absent from a checkpoint of a family of one transformer made before experts.
        expert = int(scheduler["expert"][0]) if "expert" in scheduler else 0
    except (SafetensorError, KeyError, IndexError, ValueError, TypeError, RuntimeError) as error:
        raise CheckpointRejected(f"unreadable tensors: {error}") from None
    if rng.dtype != torch.uint8 or not 0 <= step <= total or not 0 <= expert <= 1:
        raise CheckpointRejected("inconsistent scheduler or RNG state")
    return DenoiseState(step, total, latents, rng, sigmas, timesteps, expert)
