"""Drives a diffusers video pipeline one denoising step at a time, so the agent can stop,
checkpoint and resume at any step boundary: what every model family shares (the loop's frame,
the schedule's check, the preflight's tiny step, the recipe's kernels). Each family
(`worker_ami/agent/families/`) says how its pipeline encodes, predicts noise and decodes.

The loop mirrors the family's diffusers `__call__` but keeps every piece of state in a
`DenoiseState`. The components run in the dtypes of the job's `RenderRecipe`; between steps the
latents are what diffusers' scheduler returns, kept bit for bit in the checkpoint.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch.nn.attention import SDPBackend, sdpa_kernel

from kernel.job_spec import JobSpec
from kernel.precision import ComponentDtypes, Dtype
from kernel.render_stage import RenderStage
from worker_ami.agent.denoise_state import DenoiseState
from worker_ami.agent.errors import JobFault, NonFiniteLatents
from worker_ami.agent.job_inputs import NO_INPUTS, AdapterFile, JobInputs
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
class Conditioning:
    """What the encoding stage produces and every denoising step reads: the prompt's
    embeddings and, per family, more (an input image's latents and embeddings, the prompt's
    attention masks), each by name in `extras`, kept in the checkpoint of a split render."""

    positive: torch.Tensor
    negative: torch.Tensor | None
    extras: Mapping[str, torch.Tensor] = field(default_factory=dict)


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


def load_pipeline(
    pipeline_class: Any,
    model_dir: Path,
    device: str,
    dtypes: ComponentDtypes,
    components: Sequence[str],
    every_component: Sequence[str],
) -> Any:
    """Load from a local folder only (the model cache), never from a hub, each component
    straight into its dtype (no fp32 copy of a bf16 model on the way). `components`: the ones
    a stage of a split render runs (the rest of `every_component` is left out, not loaded)."""
    configure_torch(device)
    left_out = {name: None for name in every_component if name not in components}
    per_component: dict[str, torch.dtype] = {
        name: TORCH_DTYPES[dtypes.of(DTYPE_OF.get(name, name))]
        for name in every_component
        if DTYPE_OF.get(name, name) in ("transformer", "text_encoder", "vae")
    }
    # safetensors only: a pickled .bin would run its publisher's code on load.
    pipe = pipeline_class.from_pretrained(
        str(model_dir),
        local_files_only=True,
        use_safetensors=True,
        dtype=per_component | {"default": torch.float32},
        **left_out,
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe.to(device)


# The dtype each further component takes: a second expert its first's, an image encoder the
# text encoder's (the recipe names three).
DTYPE_OF = {"transformer_2": "transformer", "image_encoder": "text_encoder"}


class Renderer:
    """One model family's pipeline, stepped: the loop's frame here, the family's arithmetic in
    its subclass (`encode`, `_initial_latents`, `_guided_noise`, `decode`)."""

    family: ClassVar[str]
    pipeline_class: ClassVar[Any]
    # The components each stage loads (`load_pipeline`), and every one the pipeline has.
    stage_components: ClassVar[Mapping[RenderStage, tuple[str, ...]]]
    every_component: ClassVar[tuple[str, ...]]
    # The side of the preflight's tiny video: the family's smallest frame.
    smoke_side: ClassVar[int] = 16

    def __init__(self, pipe: Any, device: str, recipe: RenderRecipe) -> None:
        self._pipe = pipe
        self._device = torch.device(device)
        self.recipe = recipe
        self._adapters: tuple[AdapterFile, ...] = ()  # the LoRA adapters loaded now
        if recipe.compiled:
            # Regional compilation: each repeated transformer block once (diffusers lists
            # them), minutes less than the whole model, the same speed. Inductor's cache
            # (TORCHINDUCTOR_CACHE_DIR, on the instance's disk) spares later processes the
            # compile; the first step of a process pays what is not cached.
            for expert in self._experts():
                expert.compile_repeated_blocks(fullgraph=True)

    @classmethod
    def components_of(cls, stage: RenderStage | None) -> tuple[str, ...]:
        return cls.every_component if stage is None else cls.stage_components[stage]

    @classmethod
    def load(
        cls, model_dir: Path, device: str, recipe: RenderRecipe, stage: RenderStage | None = None
    ) -> Renderer:
        pipe = load_pipeline(
            cls.pipeline_class,
            model_dir,
            device,
            recipe.dtypes,
            cls.components_of(stage),
            cls.every_component,
        )
        return cls(pipe, device, recipe)

    @property
    def pipe(self) -> Any:
        return self._pipe

    @property
    def device(self) -> torch.device:
        return self._device

    def _experts(self) -> list[Any]:
        return [t for t in (getattr(self._pipe, "transformer", None),) if t is not None]

    @property
    def adapters(self) -> tuple[AdapterFile, ...]:
        return self._adapters

    def use_adapters(self, adapters: tuple[AdapterFile, ...]) -> None:
        """The job's LoRA adapters on the warm base pipeline (diffusers' adapter API, on PEFT),
        each into every expert, at its weight; those of the job before are unloaded first, so
        a job without adapters runs on the base weights alone (unloading restores the base
        modules, bit for bit). An adapter that does not fit the model is the job's fault."""
        if adapters == self._adapters or not self._experts():
            return
        pipe = self._pipe
        if self._adapters:
            pipe.unload_lora_weights()
            self._adapters = ()
        if not adapters:
            return
        two = getattr(pipe, "transformer_2", None) is not None
        try:
            for adapter in adapters:
                # Read as safetensors here, handed over as tensors: nothing is unpickled.
                weights = load_file(str(adapter.path))
                pipe.load_lora_weights(dict(weights), adapter_name=adapter.name)
                if two:
                    pipe.load_lora_weights(
                        dict(weights), adapter_name=adapter.name, load_into_transformer_2=True
                    )
            pipe.set_adapters([a.name for a in adapters], [a.weight for a in adapters])
        except (ValueError, RuntimeError, KeyError, OSError, SafetensorError) as error:
            pipe.unload_lora_weights()
            raise JobFault(f"adapter does not fit {self.family}: {str(error)[:300]}") from None
        self._adapters = adapters

    # The family's arithmetic.
    def encode(self, spec: JobSpec, inputs: JobInputs = NO_INPUTS) -> Conditioning:
        raise NotImplementedError

    def _initial_latents(self, spec: JobSpec, generator: torch.Generator) -> torch.Tensor:
        raise NotImplementedError

    def _guided_noise(
        self, latents: torch.Tensor, t: torch.Tensor, cond: Conditioning, guidance: float
    ) -> torch.Tensor:
        raise NotImplementedError

    def decode(
        self, state: DenoiseState, tiled: bool | None = None
    ) -> np.ndarray[Any, np.dtype[np.uint8]]:
        raise NotImplementedError

    def _set_schedule(self, steps: int, latents: torch.Tensor) -> None:
        self._pipe.scheduler.set_timesteps(steps, device=self._device)

    def expert_at(self, t: torch.Tensor) -> int:
        """Which expert denoises at timestep `t` (0 where the family has one)."""
        return 0

    def smoke_conditioning(self, tiny: JobSpec, stored: Conditioning | None) -> Conditioning:
        """What the preflight's tiny step reads: the stored embeddings where the stage has no
        encoder, else the tiny job's own."""
        return stored or self.encode(tiny)

    # The loop's frame.
    def _schedule(self, steps: int, latents: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self._set_schedule(steps, latents)
        scheduler = self._pipe.scheduler
        return scheduler.sigmas.detach().cpu().clone(), scheduler.timesteps.detach().cpu().clone()

    def _expert_of(self, state: DenoiseState, step: int) -> int:
        return self.expert_at(state.timesteps[min(step, state.total_steps - 1)])

    def initial_state(self, spec: JobSpec) -> DenoiseState:
        # A CPU generator: the same seed gives the same noise on every device.
        generator = torch.Generator(device="cpu").manual_seed(spec.seed)
        with torch.inference_mode():
            latents = self._initial_latents(spec, generator).detach().cpu().clone()
        sigmas, timesteps = self._schedule(spec.steps, latents)
        state = DenoiseState(
            step=0,
            total_steps=spec.steps,
            latents=latents,
            generator_state=generator.get_state(),
            sigmas=sigmas,
            timesteps=timesteps,
        )
        return replace(state, expert=self._expert_of(state, 0))

    def prepare_resume(self, state: DenoiseState) -> None:
        """Point the scheduler at the checkpoint's step; refuse a schedule (or an expert at
        this step) that differs from this pipeline's."""
        sigmas, timesteps = self._schedule(state.total_steps, state.latents)
        if not (torch.equal(sigmas, state.sigmas) and torch.equal(timesteps, state.timesteps)):
            raise JobFault("checkpoint schedule does not match this pipeline's scheduler")
        if state.expert != self._expert_of(state, state.step):
            raise JobFault(
                f"checkpoint's expert {state.expert} at step {state.step} is not this "
                f"pipeline's ({self._expert_of(state, state.step)}): another switch step"
            )

    def begin(
        self, spec: JobSpec, resume: DenoiseState | None, inputs: JobInputs = NO_INPUTS
    ) -> tuple[Conditioning, DenoiseState]:
        """The job's conditioning and the state to denoise from: `resume` (checked against
        this pipeline's schedule), or the seed's initial noise."""
        return self.encode(spec, inputs), self.start(spec, resume)

    def start(self, spec: JobSpec, resume: DenoiseState | None) -> DenoiseState:
        """The state to denoise from: `resume` (checked against this pipeline's schedule), or
        the seed's initial noise."""
        if resume is None:
            return self.initial_state(spec)
        self.prepare_resume(resume)
        return resume

    def smoke(self, spec: JobSpec, state: DenoiseState, cond: Conditioning | None = None) -> None:
        """One tiny step (16x16, one frame, the family's smallest; 16 wider per GPU of a render
        across several, whose tokens must divide among them): the preflight's proof that the
        pipeline runs on this device; then the scheduler points at `state`'s schedule again.
        `cond`: the stored conditioning, for a pipeline without its encoders (a denoising
        stage)."""
        gpus = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
        side = self.smoke_side
        tiny = spec.model_copy(
            update={"width": side * gpus, "height": side, "num_frames": 1, "steps": 1}
        )
        self.step(self.initial_state(tiny), self.smoke_conditioning(tiny, cond), tiny.guidance)
        self.prepare_resume(state)

    def step(self, state: DenoiseState, cond: Conditioning, guidance: float) -> DenoiseState:
        """One denoising step: the family's guided prediction, then the scheduler."""
        scheduler = self._pipe.scheduler
        # set_timesteps clears the scheduler's position; begin_index then puts it at our step.
        self._set_schedule(state.total_steps, state.latents)
        scheduler.set_begin_index(state.step)
        generator = torch.Generator(device="cpu")
        generator.set_state(state.generator_state)
        t = state.timesteps[state.step].to(self._device)
        latents = state.latents.to(self._device)
        with torch.inference_mode(), attention_kernel(self.recipe.attention):
            noise = self._guided_noise(latents, t, cond, guidance)
            latents = scheduler.step(noise, t, latents, generator=generator, return_dict=False)[0]
        if not bool(torch.isfinite(latents).all()):
            raise NonFiniteLatents(f"non-finite latents after step {state.step + 1}")
        return replace(
            state,
            step=state.step + 1,
            latents=latents.detach().cpu().clone(),
            generator_state=generator.get_state(),
            expert=self._expert_of(state, state.step + 1),
        )

    def _cfg(
        self,
        forward: Any,
        latents: torch.Tensor,
        cond: Conditioning,
        guidance: float,
        masks: tuple[torch.Tensor, torch.Tensor | None] | None = None,
    ) -> torch.Tensor:
        """Classifier-free guidance as the recipe lays it out: one forward of batch two, or
        two forwards (diffusers' order: cond, then uncond). `forward(latents, embeddings,
        mask)`; `masks`: the prompts' attention masks where the family takes them."""
        positive_mask, negative_mask = masks or (None, None)
        if cond.negative is None or guidance <= 1.0:
            result: torch.Tensor = forward(latents, cond.positive, positive_mask)
            return result
        if self.recipe.cfg == "batched":
            both_masks = None
            if positive_mask is not None and negative_mask is not None:
                both_masks = torch.cat([positive_mask, negative_mask])
            both = forward(
                torch.cat([latents, latents]), torch.cat([cond.positive, cond.negative]), both_masks
            )
            noise, uncond = both.chunk(2)
        else:
            noise = forward(latents, cond.positive, positive_mask)
            uncond = forward(latents, cond.negative, negative_mask)
        return _guide(noise, uncond, guidance)
