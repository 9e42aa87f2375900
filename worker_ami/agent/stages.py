"""A render split into stages that can run on different GPUs (or the CPU): prompt encoding
(the text encoder), denoising (the transformer) and decoding (the VAE). Each stage loads only
the components it runs. What passes between them are safetensors blobs, stored in S3 like a
checkpoint: the prompt's embeddings, and the final latents, which are the job's last
checkpoint already. The video is the one the unsplit render makes, bit for bit: each stage
computes exactly what the unsplit render computes at that point, from the same tensors.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from safetensors import SafetensorError
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from kernel.job_spec import JobSpec
from worker_ami.agent.denoise_state import DenoiseState
from worker_ami.agent.errors import CheckpointRejected
from worker_ami.agent.renderer import PromptEmbeddings, Renderer

Stage = Literal["encode", "denoise", "decode"]
# The components each stage loads (`load_pipeline`'s `components`).
STAGE_COMPONENTS: dict[Stage, tuple[str, ...]] = {
    "encode": ("text_encoder",),
    "denoise": ("transformer",),
    "decode": ("vae",),
}
EMBEDDINGS = "embeddings.safetensors"


def encode_embeddings(prompt: PromptEmbeddings) -> dict[str, bytes]:
    tensors = {"positive": prompt.positive.detach().cpu().contiguous()}
    if prompt.negative is not None:
        tensors["negative"] = prompt.negative.detach().cpu().contiguous()
    return {EMBEDDINGS: save_tensors(tensors)}


def decode_embeddings(blobs: dict[str, bytes]) -> PromptEmbeddings:
    try:
        tensors = load_tensors(blobs[EMBEDDINGS])
        return PromptEmbeddings(tensors["positive"], tensors.get("negative"))
    except (SafetensorError, KeyError, ValueError, TypeError, RuntimeError) as error:
        raise CheckpointRejected(f"unreadable embeddings: {error}") from None


def encode_stage(renderer: Renderer, spec: JobSpec) -> dict[str, bytes]:
    """The prompt's embeddings, as blobs for the denoising stage."""
    return encode_embeddings(renderer.encode(spec))


def denoise_stage(
    renderer: Renderer,
    spec: JobSpec,
    embeddings: dict[str, bytes],
    resume: DenoiseState | None = None,
) -> DenoiseState:
    """Every step from the seed's noise (or from `resume`) on the stored embeddings; the final
    state is the job's last checkpoint, and what the decoding stage reads."""
    device = renderer.device
    stored = decode_embeddings(embeddings)
    prompt = PromptEmbeddings(
        stored.positive.to(device),
        None if stored.negative is None else stored.negative.to(device),
    )
    state = renderer.start(spec, resume)
    while state.step < state.total_steps:
        state = renderer.step(state, prompt, spec.guidance)
    return state


def decode_stage(renderer: Renderer, state: DenoiseState) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """The video's frames from the final latents."""
    return renderer.decode(state)
