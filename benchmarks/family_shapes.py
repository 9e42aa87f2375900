"""Pipelines of each model family at its real shape with random weights (no download), for
`benchmarks/gpu_families.py`: Wan 2.1 image-to-video 14B, Wan 2.2 A14B (two 14B experts, text-
and image-to-video), LTX-Video 2B. Encoders keep their width and lose most layers: they run
once per job, not per step. `dry`: the tiny test pipelines of `tiny_families` instead."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import torch
from diffusers import (
    AutoencoderKLLTXVideo,
    AutoencoderKLWan,
    FlowMatchEulerDiscreteScheduler,
    LTXPipeline,
    LTXVideoTransformer3DModel,
    WanTransformer3DModel,
)
from PIL import Image
from transformers import (
    CLIPImageProcessor,
    CLIPVisionConfig,
    CLIPVisionModel,
    T5Config,
    T5EncoderModel,
    UMT5Config,
    UMT5EncoderModel,
)

from benchmarks.wan_shapes import BF16, WAN, WAN_COMMON
from kernel.job_spec import JobSpec
from kernel.model_family import ModelFamily, traits_of
from worker_ami.agent.families import renderer_class
from worker_ami.agent.families.ltx import MAX_PROMPT_TOKENS
from worker_ami.agent.renderer import TORCH_DTYPES
from worker_ami.agent.tiny_families import build_tiny, compose_wan
from worker_ami.agent.tiny_model import word_tokenizer

# (height, width, frames) each family is timed at: Wan's 480p of 81 frames, LTX-Video's
# 512x768 of 121 (its published default).
SHAPES = {family: (480, 832, 81) for family in ModelFamily} | {
    ModelFamily.LTX_VIDEO: (512, 768, 121)
}


def _umt5() -> UMT5EncoderModel:
    config = UMT5Config(
        vocab_size=64, d_model=4096, d_kv=64, d_ff=10240, num_layers=2, num_heads=64
    )
    return UMT5EncoderModel(config)


def _wan_14b(in_channels: int, image_dim: int | None) -> WanTransformer3DModel:
    config = WAN_COMMON | WAN["wan2.1-t2v-14b"] | {"in_channels": in_channels}
    if image_dim is not None:
        config |= {"image_dim": image_dim, "added_kv_proj_dim": 5120}
    return WanTransformer3DModel(**config)


def _real(family: ModelFamily) -> Any:
    if family is ModelFamily.LTX_VIDEO:
        t5 = T5Config(vocab_size=64, d_model=4096, d_kv=64, d_ff=10240, num_layers=2, num_heads=64)
        return LTXPipeline(
            scheduler=FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True),
            vae=AutoencoderKLLTXVideo(),
            text_encoder=T5EncoderModel(t5),
            tokenizer=word_tokenizer(max_length=128),
            transformer=LTXVideoTransformer3DModel(),
        )
    common: dict[str, Any] = {
        "tokenizer": word_tokenizer(max_length=512),
        "text_encoder": _umt5(),
        "vae": AutoencoderKLWan(),
        "scheduler": FlowMatchEulerDiscreteScheduler(shift=3.0),
    }

    def clip() -> tuple[CLIPVisionModel, CLIPImageProcessor]:
        config = CLIPVisionConfig(
            hidden_size=1280,
            intermediate_size=5120,
            num_hidden_layers=2,
            num_attention_heads=16,
            image_size=224,
            patch_size=14,
        )
        processor = CLIPImageProcessor(crop_size=224, size={"shortest_edge": 224})
        return CLIPVisionModel(config), processor

    return compose_wan(family, common, _wan_14b, clip)


def build_family(family: ModelFamily, device: str, dry: bool) -> Any:
    """The family's pipeline on `device`, the transformers and text encoder in bf16, the VAE
    (and an image encoder) as the recipe says."""
    if dry:
        folder = build_tiny(family, Path(tempfile.mkdtemp(prefix="family-")) / family.value)
        pipe = renderer_class(family).pipeline_class.from_pretrained(str(folder))
    else:
        torch.manual_seed(0)
        with torch.device(device):
            pipe = _real(family)
    for name in ("transformer", "transformer_2", "text_encoder", "image_encoder"):
        part = getattr(pipe, name, None)
        if part is not None:
            dtype = BF16.transformer if "transformer" in name else BF16.text_encoder
            part.to(TORCH_DTYPES[dtype]).eval()
    pipe.vae.to(TORCH_DTYPES[BF16.vae]).eval()
    pipe.set_progress_bar_config(disable=True)
    return pipe.to(device)


def diffusers_call(pipe: Any, family: ModelFamily, spec: JobSpec, image: Path) -> dict[str, Any]:
    """The arguments of the family's own diffusers pipeline for `spec` (latents out): what a
    plain diffusers user would pass for the job FrameFleet renders."""
    call: dict[str, Any] = {
        "prompt": spec.prompt,
        "negative_prompt": spec.negative_prompt,
        "height": spec.height,
        "width": spec.width,
        "num_frames": spec.num_frames,
        "num_inference_steps": spec.steps,
        "guidance_scale": spec.guidance,
        "generator": torch.Generator("cpu").manual_seed(spec.seed),
        "output_type": "latent",
    }
    if traits_of(family).image_input:
        call["image"] = Image.open(image).convert("RGB")
    if family is ModelFamily.LTX_VIDEO:
        return call | {"frame_rate": spec.fps, "max_sequence_length": MAX_PROMPT_TOKENS}
    # FrameFleet encodes at most the tokenizer's length (and 512): the same embeddings.
    return call | {"max_sequence_length": int(min(pipe.tokenizer.model_max_length, 512))}
