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
    WanImageToVideoPipeline,
    WanPipeline,
    WanTransformer3DModel,
)
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
from kernel.model_family import ModelFamily
from worker_ami.agent.families import renderer_class
from worker_ami.agent.renderer import TORCH_DTYPES
from worker_ami.agent.tiny_families import I2V_BOUNDARY, T2V_BOUNDARY, build_tiny
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


def _wan_14b(in_channels: int = 16, image_dim: int | None = None) -> WanTransformer3DModel:
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
    if family is ModelFamily.WAN22_T2V:
        return WanPipeline(
            **common,
            transformer=_wan_14b(),
            transformer_2=_wan_14b(),
            boundary_ratio=T2V_BOUNDARY,
        )
    if family is ModelFamily.WAN21_I2V:
        clip = CLIPVisionConfig(
            hidden_size=1280,
            intermediate_size=5120,
            num_hidden_layers=2,
            num_attention_heads=16,
            image_size=224,
            patch_size=14,
        )
        return WanImageToVideoPipeline(
            **common,
            transformer=_wan_14b(36, image_dim=1280),
            image_encoder=CLIPVisionModel(clip),
            image_processor=CLIPImageProcessor(crop_size=224, size={"shortest_edge": 224}),
        )
    if family is ModelFamily.WAN22_I2V:
        return WanImageToVideoPipeline(
            **common,
            transformer=_wan_14b(36),
            transformer_2=_wan_14b(36),
            boundary_ratio=I2V_BOUNDARY,
        )
    raise ValueError(f"{family}: timed by benchmarks/gpu_step.py")


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
