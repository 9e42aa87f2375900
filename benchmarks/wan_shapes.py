"""Wan 2.1 1.3B- and 14B-shaped pipelines built from the real configs with random weights (no
download), the job specs the GPU benchmark renders, and its timing of FrameFleet's step and of
plain diffusers (`benchmarks/gpu_step.py`)."""

from __future__ import annotations

import itertools
import time
from typing import Any

import torch
from diffusers import (
    AutoencoderKLWan,
    FlowMatchEulerDiscreteScheduler,
    WanPipeline,
    WanTransformer3DModel,
)
from transformers import UMT5Config, UMT5EncoderModel

from kernel.job_spec import JobSpec, parse_job
from kernel.precision import ComponentDtypes, Dtype
from worker_ami.agent.job_inputs import NO_INPUTS, JobInputs
from worker_ami.agent.recipe import AttentionKernel, CfgLayout, RenderRecipe
from worker_ami.agent.renderer import TORCH_DTYPES, Renderer
from worker_ami.agent.tiny_model import word_tokenizer

WAN = {
    "wan2.1-t2v-1.3b": {"num_attention_heads": 12, "ffn_dim": 8960, "num_layers": 30},
    "wan2.1-t2v-14b": {"num_attention_heads": 40, "ffn_dim": 13824, "num_layers": 40},
}
WAN_COMMON: dict[str, Any] = {
    "patch_size": (1, 2, 2),
    "attention_head_dim": 128,
    "in_channels": 16,
    "out_channels": 16,
    "text_dim": 4096,
    "freq_dim": 256,
    "cross_attn_norm": True,
    "qk_norm": "rms_norm_across_heads",
    "eps": 1e-6,
    "rope_max_seq_len": 1024,
}
# `--dry-run`: the same code paths on a CPU, every model cut to one narrow layer.
DRY = {
    "num_attention_heads": 2,
    "attention_head_dim": 16,
    "ffn_dim": 64,
    "num_layers": 1,
    "text_dim": 64,
}
BF16 = ComponentDtypes(transformer=Dtype.BF16, text_encoder=Dtype.BF16, vae=Dtype.FP32)
FP32 = ComponentDtypes(transformer=Dtype.FP32, text_encoder=Dtype.FP32, vae=Dtype.FP32)
STEPS = 50  # Wan's default schedule; only a few of its steps are run


def build_wan(name: str, device: str, dtypes: ComponentDtypes, dry: bool = False) -> WanPipeline:
    """A random-weight pipeline of `name`'s shape, built on `device` in `dtypes` (`dry`: cut
    to one narrow layer, for a run of the benchmark's code paths on a CPU)."""
    torch.manual_seed(0)
    config = WAN_COMMON | WAN[name] | (DRY if dry else {})
    width = int(config["text_dim"])
    with torch.device(device):
        transformer = WanTransformer3DModel(**config)
        text_encoder = UMT5EncoderModel(
            UMT5Config(
                vocab_size=64,
                d_model=width,
                d_kv=64,
                d_ff=width * 5 // 2,
                num_layers=1 if dry else 2,
                num_heads=width // 64 if width >= 64 else 1,
                relative_attention_num_buckets=32,
                relative_attention_max_distance=128,
            )
        )
        vae = AutoencoderKLWan(base_dim=8) if dry else AutoencoderKLWan()
    pipe = WanPipeline(
        tokenizer=word_tokenizer(max_length=512),
        text_encoder=text_encoder.to(TORCH_DTYPES[dtypes.text_encoder]).eval(),
        vae=vae.to(TORCH_DTYPES[dtypes.vae]).eval(),
        scheduler=FlowMatchEulerDiscreteScheduler(shift=3.0),
        transformer=transformer.to(TORCH_DTYPES[dtypes.transformer]).eval(),
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


def job(name: str, height: int, width: int, frames: int, steps: int = STEPS) -> JobSpec:
    return parse_job(
        {
            "schema": "framefleet.job/v1",
            "job_id": f"bench-{height}-{frames}",
            "model": "wan/t2v",
            "prompt": "a red fox running through snow",
            "negative_prompt": "blurry low quality",
            "width": width,
            "height": height,
            "num_frames": frames,
            "steps": steps,
            "guidance": 5.0,
            "seed": 7,
            "output": "s3://bench-out/videos/",
        },
        now=None,
    )


def recipe(
    dtypes: ComponentDtypes, family: str, cfg: CfgLayout, attention: AttentionKernel
) -> RenderRecipe:
    return RenderRecipe(dtypes=dtypes, gpu_family=family, cfg=cfg, attention=attention)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_renderer(
    renderer: Renderer,
    spec: JobSpec,
    device: str,
    warmup: int,
    timed: int,
    inputs: JobInputs = NO_INPUTS,
) -> tuple[list[float], torch.Tensor]:
    prompt, state = renderer.begin(spec, None, inputs)
    seconds = []
    for _ in range(warmup + timed):
        sync(device)
        started = time.perf_counter()
        state = renderer.step(state, prompt, spec.guidance)
        sync(device)
        seconds.append(time.perf_counter() - started)
    return seconds, state.latents  # the warm-up steps first


class StepStamps:
    """diffusers' step callback: the time at each step's end, the pipeline stopped (its
    interrupt) after `steps` of them; `start()` before the call."""

    def __init__(self, device: str, steps: int) -> None:
        self.device, self.steps = device, steps
        self.stamps: list[float] = []

    def start(self) -> None:
        sync(self.device)
        self.stamps.append(time.perf_counter())

    def __call__(self, pipeline: Any, i: int, t: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        self.start()
        if len(self.stamps) > self.steps:
            pipeline._interrupt = True
        return kwargs

    def seconds(self) -> list[float]:
        return [b - a for a, b in itertools.pairwise(self.stamps)][: self.steps]


def time_diffusers(
    pipe: WanPipeline, renderer: Renderer, spec: JobSpec, device: str, warmup: int, timed: int
) -> tuple[list[float], torch.Tensor]:
    """Plain `WanPipeline.__call__` from the same noise and embeddings, stopped (diffusers'
    interrupt) after the steps it is timed for."""
    prompt, state = renderer.begin(spec, None)
    stamps = StepStamps(device, warmup + timed)
    stamps.start()
    latents = pipe(
        prompt_embeds=prompt.positive,
        negative_prompt_embeds=prompt.negative,
        height=spec.height,
        width=spec.width,
        num_frames=spec.num_frames,
        num_inference_steps=spec.steps,
        guidance_scale=spec.guidance,
        latents=state.latents.to(device),
        output_type="latent",
        callback_on_step_end=stamps,
    ).frames
    return stamps.seconds(), latents.detach().float().cpu()
