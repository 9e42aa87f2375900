"""A render split into stages that can run on different GPUs (or the CPU): prompt encoding
(the text encoder), denoising (the transformer) and decoding (the VAE). Each stage loads only
the components it runs. What passes between them are safetensors blobs, stored in S3 as a
checkpoint: the encoding stage's checkpoint holds the prompt's embeddings alone (at step 0);
every checkpoint of the denoising stage holds them beside its state, so that a denoising
stage stopped by a spot notice resumes elsewhere without the text encoder; its last one (every
step done) is what the decoding stage reads. The video is the one the unsplit render makes,
bit for bit: each stage computes exactly what the unsplit render computes at that point, from
the same tensors.

A render session (thread or process) opens a stage with `open_stage` and writes its
checkpoints with `stage_blobs`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from safetensors import SafetensorError
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from kernel.job_spec import JobSpec
from kernel.render_stage import RenderStage
from worker_ami.agent.denoise_state import DenoiseState
from worker_ami.agent.errors import CheckpointRejected
from worker_ami.agent.job_inputs import NO_INPUTS, JobInputs
from worker_ami.agent.renderer import TORCH_DTYPES, Conditioning, Renderer
from worker_ami.agent.stage_input import stage_input_check
from worker_ami.agent.state_codec import EMBEDDINGS, encode_state

# A family's further conditioning is stored under its name with this prefix.
_EXTRA = "extra."


def encode_embeddings(cond: Conditioning) -> dict[str, bytes]:
    tensors = {"positive": cond.positive.detach().cpu().contiguous()}
    if cond.negative is not None:
        tensors["negative"] = cond.negative.detach().cpu().contiguous()
    for name, tensor in cond.extras.items():
        tensors[_EXTRA + name] = tensor.detach().cpu().contiguous()
    return {EMBEDDINGS: save_tensors(tensors)}


def decode_embeddings(blobs: dict[str, bytes]) -> Conditioning:
    try:
        tensors = load_tensors(blobs[EMBEDDINGS])
        extras = {
            name.removeprefix(_EXTRA): tensor
            for name, tensor in tensors.items()
            if name.startswith(_EXTRA)
        }
        return Conditioning(tensors["positive"], tensors.get("negative"), extras)
    except (SafetensorError, KeyError, ValueError, TypeError, RuntimeError) as error:
        raise CheckpointRejected(f"unreadable embeddings: {error}") from None


def open_stage(
    renderer: Renderer,
    spec: JobSpec,
    stage: RenderStage | None,
    resume: DenoiseState | None,
    embeddings: dict[str, bytes] | None,
    inputs: JobInputs = NO_INPUTS,
) -> tuple[Conditioning | None, DenoiseState | None]:
    """The prompt's embeddings and the state a session starts from, as its stage needs them:
    the whole render encodes and starts (or resumes); the encoding stage encodes only; the
    denoising stage reads the stored embeddings and starts (or resumes); the decoding stage
    takes the final state. JobFault where the checkpoint lacks what the stage needs."""
    # Every stage: one that has no transformer loaded ignores them.
    renderer.use_adapters(inputs.adapters)
    if stage is None:
        return renderer.begin(spec, resume, inputs)
    if stage is RenderStage.ENCODE:
        return renderer.encode(spec, inputs), None
    stage_input_check(stage, resume, embeddings)
    if stage is RenderStage.DENOISE:
        assert embeddings is not None
        stored = decode_embeddings(embeddings)
        # Made by a text encoder in another dtype (a T4's fp16 for a bf16 transformer): cast
        # at the boundary, deliberately (the resume's notes say so); a no-op when they agree.
        dtype = TORCH_DTYPES[renderer.recipe.dtypes.transformer]
        device = renderer.device
        prompt = Conditioning(
            stored.positive.to(device, dtype=dtype),
            None if stored.negative is None else stored.negative.to(device, dtype=dtype),
            {name: tensor.to(device) for name, tensor in stored.extras.items()},
        )
        return prompt, renderer.start(spec, resume)
    return None, resume


def smoke_stage(
    renderer: Renderer,
    spec: JobSpec,
    stage: RenderStage | None,
    prompt: Conditioning | None,
    state: DenoiseState | None,
) -> None:
    """The preflight's tiny step where the stage steps: the whole render, or the denoising
    stage on its stored embeddings. The encoding stage's open has run the encoder on this
    device already (all its work), and the decoding stage's one decode is its own proof."""
    if state is None or stage not in (None, RenderStage.DENOISE):
        return
    renderer.smoke(spec, state, prompt if stage is RenderStage.DENOISE else None)


def stage_blobs(
    stage: RenderStage | None, prompt: Conditioning | None, state: DenoiseState | None
) -> dict[str, bytes]:
    """A checkpoint's blobs: the state's, with the embeddings where a later stage (or this
    one, resumed) reads them."""
    blobs = encode_state(state) if state is not None else {}
    if stage in (RenderStage.ENCODE, RenderStage.DENOISE) and prompt is not None:
        blobs.update(encode_embeddings(prompt))
    return blobs


def encode_stage(
    renderer: Renderer, spec: JobSpec, inputs: JobInputs = NO_INPUTS
) -> dict[str, bytes]:
    """The job's conditioning, as blobs for the denoising stage."""
    return encode_embeddings(renderer.encode(spec, inputs))


def denoise_stage(
    renderer: Renderer,
    spec: JobSpec,
    embeddings: dict[str, bytes],
    resume: DenoiseState | None = None,
) -> DenoiseState:
    """Every step from the seed's noise (or from `resume`) on the stored embeddings; the final
    state is the job's last checkpoint, and what the decoding stage reads."""
    prompt, state = open_stage(renderer, spec, RenderStage.DENOISE, resume, embeddings)
    assert prompt is not None
    assert state is not None
    while state.step < state.total_steps:
        state = renderer.step(state, prompt, spec.guidance)
    return state


def decode_stage(renderer: Renderer, state: DenoiseState) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """The video's frames from the final latents."""
    return renderer.decode(state)
