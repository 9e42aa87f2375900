"""Drives a diffusers Wan text-to-video pipeline one denoising step at a time, so the agent can
stop, checkpoint and resume at any step boundary.

The loop mirrors `WanPipeline.__call__` (Wan 2.1: one transformer, classifier-free guidance,
flow-matching scheduler) but keeps every piece of state in a `DenoiseState`. The transformer,
text encoder and VAE run in the dtypes of the job's `RenderRecipe`; between steps the latents are
what diffusers' scheduler returns (the transformer's dtype after the first step), kept bit for
bit in the checkpoint.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from diffusers import WanPipeline
from torch.nn.attention import SDPBackend, sdpa_kernel

from kernel.job_spec import JobSpec
from kernel.precision import COMPONENTS, ComponentDtypes, Dtype
from kernel.stage_cost import decode_tiled
from worker_ami.agent.denoise_state import DenoiseState
from worker_ami.agent.errors import JobFault, NonFiniteLatents
from worker_ami.agent.recipe import AttentionKernel, RenderRecipe

MAX_SEQUENCE_LENGTH = 512
TORCH_DTYPES = {Dtype.BF16: torch.bfloat16, Dtype.FP16: torch.float16, Dtype.FP32: torch.float32}
# cuBLAS picks its reduction order from its workspace; a fixed configuration makes repeated
# matrix products bit-identical (PyTorch's reproducibility notes). Set before CUDA starts.
CUBLAS_WORKSPACE = ":4096:8"
_KERNELS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "math": SDPBackend.MATH,
}


@dataclass(frozen=True)
class PromptEmbeddings:
    positive: torch.Tensor
    negative: torch.Tensor | None


def configure_torch(device: str) -> None:
    """What makes runs on this device repeatable, and fp32 fast where it remains: the same
    kernels every time (no cuDNN autotuning, deterministic algorithms where PyTorch has them),
    a fixed cuBLAS workspace, and TF32 tensor cores for the fp32 components (the VAE)."""
    if not device.startswith("cuda"):
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True


def load_pipeline(
    model_dir: Path,
    device: str,
    dtypes: ComponentDtypes,
    components: Sequence[str] = COMPONENTS,
) -> WanPipeline:
    """Load from a local folder only (the model cache), never from a hub, each component
    straight into its dtype (no fp32 copy of a bf16 model on the way). `components`: the ones
    a stage of a split render runs (the others are left out, not loaded)."""
    configure_torch(device)
    left_out = {name: None for name in COMPONENTS if name not in components}
    per_component: dict[str, torch.dtype] = {
        name: TORCH_DTYPES[dtypes.of(name)] for name in COMPONENTS
    }
    # safetensors only: a pickled .bin would run its publisher's code on load.
    pipe = WanPipeline.from_pretrained(
        str(model_dir),
        local_files_only=True,
        use_safetensors=True,
        dtype=per_component | {"default": torch.float32},
        **left_out,
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe.to(device)


@contextlib.contextmanager
def attention_kernel(kernel: AttentionKernel) -> Iterator[None]:
    """The attention kernel tried first; the others only where it cannot run (flash has no
    fp32: the VAE's attention falls to the memory-efficient kernel, always the same one)."""
    if kernel == "default":
        yield
        return
    order = [_KERNELS[kernel]] + [
        b for b in (SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH) if b != _KERNELS[kernel]
    ]
    with sdpa_kernel(order, set_priority=True):
        yield


def _guide(noise: torch.Tensor, uncond: torch.Tensor, guidance: float) -> torch.Tensor:
    """Classifier-free guidance, in diffusers' order of operations (the same bits)."""
    return uncond + guidance * (noise - uncond)


class Renderer:
    def __init__(self, pipe: WanPipeline, device: str, recipe: RenderRecipe) -> None:
        self._pipe = pipe
        self._device = torch.device(device)
        self.recipe = recipe
        if recipe.compiled:
            # Regional compilation: each repeated transformer block once (diffusers lists
            # them), minutes less than the whole model, the same speed. Inductor's cache
            # (TORCHINDUCTOR_CACHE_DIR, on the instance's disk) spares later processes the
            # compile; the first step of a process pays what is not cached.
            pipe.transformer.compile_repeated_blocks(fullgraph=True)

    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def max_sequence_length(self) -> int:
        limit = getattr(self._pipe.tokenizer, "model_max_length", MAX_SEQUENCE_LENGTH)
        return int(min(limit, MAX_SEQUENCE_LENGTH))

    def encode(self, spec: JobSpec) -> PromptEmbeddings:
        with torch.inference_mode():
            positive, negative = self._pipe.encode_prompt(
                prompt=spec.prompt,
                negative_prompt=spec.negative_prompt,
                do_classifier_free_guidance=spec.guidance > 1.0,
                num_videos_per_prompt=1,
                max_sequence_length=self.max_sequence_length,
                device=self._device,
            )
        # The transformer's dtype as the recipe gives it: a prompt-encoding stage has no
        # transformer loaded.
        dtype = TORCH_DTYPES[self.recipe.dtypes.transformer]
        return PromptEmbeddings(
            positive=positive.to(dtype), negative=None if negative is None else negative.to(dtype)
        )

    def _schedule(self, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
        scheduler = self._pipe.scheduler
        scheduler.set_timesteps(steps, device=self._device)
        return scheduler.sigmas.detach().cpu().clone(), scheduler.timesteps.detach().cpu().clone()

    def initial_state(self, spec: JobSpec) -> DenoiseState:
        # A CPU generator: the same seed gives the same noise on every device.
        generator = torch.Generator(device="cpu").manual_seed(spec.seed)
        sigmas, timesteps = self._schedule(spec.steps)
        with torch.inference_mode():
            latents = self._pipe.prepare_latents(
                1,
                self._pipe.transformer.config.in_channels,
                spec.height,
                spec.width,
                spec.num_frames,
                torch.float32,
                self._device,
                generator,
                None,
            )
        return DenoiseState(
            step=0,
            total_steps=spec.steps,
            latents=latents.detach().cpu().clone(),
            generator_state=generator.get_state(),
            sigmas=sigmas,
            timesteps=timesteps,
        )

    def prepare_resume(self, state: DenoiseState) -> None:
        """Point the scheduler at the checkpoint's step; refuse a schedule that differs."""
        sigmas, timesteps = self._schedule(state.total_steps)
        if not (torch.equal(sigmas, state.sigmas) and torch.equal(timesteps, state.timesteps)):
            raise JobFault("checkpoint schedule does not match this pipeline's scheduler")

    def begin(
        self, spec: JobSpec, resume: DenoiseState | None
    ) -> tuple[PromptEmbeddings, DenoiseState]:
        """The prompt's embeddings and the state to denoise from: `resume` (checked against
        this pipeline's schedule), or the seed's initial noise."""
        return self.encode(spec), self.start(spec, resume)

    def start(self, spec: JobSpec, resume: DenoiseState | None) -> DenoiseState:
        """The state to denoise from: `resume` (checked against this pipeline's schedule), or
        the seed's initial noise."""
        if resume is None:
            return self.initial_state(spec)
        self.prepare_resume(resume)
        return resume

    def smoke(
        self, spec: JobSpec, state: DenoiseState, prompt: PromptEmbeddings | None = None
    ) -> None:
        """One tiny step (16x16, one frame; 16 wider per GPU of a render across several, whose
        tokens must divide among them): the preflight's proof that the pipeline runs on this
        device; then the scheduler points at `state`'s schedule again. `prompt`: embeddings to
        step on, for a pipeline without its text encoder (a denoising stage)."""
        gpus = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
        tiny = spec.model_copy(
            update={"width": 16 * gpus, "height": 16, "num_frames": 1, "steps": 1}
        )
        self.step(self.initial_state(tiny), prompt or self.encode(tiny), tiny.guidance)
        self.prepare_resume(state)

    def step(self, state: DenoiseState, prompt: PromptEmbeddings, guidance: float) -> DenoiseState:
        """One denoising step: the transformer (twice with guidance), then the scheduler."""
        pipe = self._pipe
        scheduler = pipe.scheduler
        # set_timesteps clears the scheduler's position; begin_index then puts it at our step.
        scheduler.set_timesteps(state.total_steps, device=self._device)
        scheduler.set_begin_index(state.step)
        generator = torch.Generator(device="cpu")
        generator.set_state(state.generator_state)
        t = state.timesteps[state.step].to(self._device)
        latents = state.latents.to(self._device)
        with torch.inference_mode(), attention_kernel(self.recipe.attention):
            noise = self._guided_noise(latents, t, prompt, guidance)
            latents = scheduler.step(noise, t, latents, generator=generator, return_dict=False)[0]
        if not bool(torch.isfinite(latents).all()):
            raise NonFiniteLatents(f"non-finite latents after step {state.step + 1}")
        return replace(
            state,
            step=state.step + 1,
            latents=latents.detach().cpu().clone(),
            generator_state=generator.get_state(),
        )

    def _guided_noise(
        self, latents: torch.Tensor, t: torch.Tensor, prompt: PromptEmbeddings, guidance: float
    ) -> torch.Tensor:
        """The transformer's prediction with classifier-free guidance, as the recipe lays it
        out: one forward of batch two, or two forwards (diffusers' order: cond, then uncond)."""
        model_input = latents.to(self._pipe.transformer.dtype)
        negative = prompt.negative if guidance > 1.0 else None
        if negative is None:
            return self._forward(model_input, t, prompt.positive)
        if self.recipe.cfg == "batched":
            both = self._forward(
                torch.cat([model_input, model_input]), t, torch.cat([prompt.positive, negative])
            )
            noise, noise_uncond = both.chunk(2)
        else:
            noise = self._forward(model_input, t, prompt.positive)
            noise_uncond = self._forward(model_input, t, negative)
        return _guide(noise, noise_uncond, guidance)

    def _forward(
        self, hidden: torch.Tensor, t: torch.Tensor, embeddings: torch.Tensor
    ) -> torch.Tensor:
        output: torch.Tensor = self._pipe.transformer(
            hidden_states=hidden,
            timestep=t.expand(hidden.shape[0]),
            encoder_hidden_states=embeddings,
            return_dict=False,
        )[0]
        return output

    def decode(
        self, state: DenoiseState, tiled: bool | None = None
    ) -> np.ndarray[Any, np.dtype[np.uint8]]:
        """Latents to frames, shape (frames, height, width, 3), uint8; in tiles where the
        frame size says (`kernel.stage_cost.decode_tiled`), unless `tiled` says otherwise."""
        pipe = self._pipe
        vae = pipe.vae
        ratio = int(vae.spatial_compression_ratio)
        height, width = (int(side) * ratio for side in state.latents.shape[-2:])
        if tiled if tiled is not None else decode_tiled(width, height):
            vae.enable_tiling()
        else:
            vae.disable_tiling()
        with torch.inference_mode(), attention_kernel(self.recipe.attention):
            latents = state.latents.to(self._device, dtype=vae.dtype)
            z_dim = vae.config.z_dim
            mean = torch.tensor(vae.config.latents_mean).view(1, z_dim, 1, 1, 1).to(latents)
            inv_std = 1.0 / torch.tensor(vae.config.latents_std).view(1, z_dim, 1, 1, 1).to(latents)
            video = vae.decode(latents / inv_std + mean, return_dict=False)[0]
            frames = pipe.video_processor.postprocess_video(video, output_type="np")[0]
        return np.asarray(np.round(np.clip(frames, 0.0, 1.0) * 255.0), dtype=np.uint8)
