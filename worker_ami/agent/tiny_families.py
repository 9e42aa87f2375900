"""Tiny random-weight pipelines of every model family but Wan 2.1 text-to-video (`tiny_model`),
built from diffusers' own classes and configs at toy sizes: Wan 2.2's two experts, Wan 2.1 and
2.2 image-to-video, LTX-Video. For tests, the demo and benchmarks without weights or internet;
saved with `save_pretrained` and loaded back through the worker's own loader.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from diffusers import (
    AutoencoderKLLTXVideo,
    FlowMatchEulerDiscreteScheduler,
    LTXPipeline,
    LTXVideoTransformer3DModel,
    WanImageToVideoPipeline,
    WanPipeline,
)
from transformers import (
    CLIPImageProcessor,
    CLIPVisionConfig,
    CLIPVisionModel,
    T5Config,
    T5EncoderModel,
)

from kernel.model_family import ModelFamily
from worker_ami.agent.tiny_model import (
    TINY_TEXT,
    build_tiny_wan,
    tiny_umt5,
    tiny_wan_transformer,
    tiny_wan_vae,
    word_tokenizer,
)

TEXT_DIM = 16
# Where Wan 2.2's 14B models hand over from the high-noise expert to the low-noise one.
T2V_BOUNDARY, I2V_BOUNDARY = 0.875, 0.9


def _clip() -> tuple[CLIPVisionModel, CLIPImageProcessor]:
    config = CLIPVisionConfig(
        hidden_size=TEXT_DIM,
        intermediate_size=2 * TEXT_DIM,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=32,
        patch_size=16,
        projection_dim=TEXT_DIM,
    )
    processor = CLIPImageProcessor(crop_size=32, size={"shortest_edge": 32})
    return CLIPVisionModel(config), processor


def _ltx() -> LTXPipeline:
    vae = AutoencoderKLLTXVideo(
        latent_channels=8,
        block_out_channels=(8, 8, 8, 8),
        decoder_block_out_channels=(8, 8, 8, 8),
        layers_per_block=(1, 1, 1, 1, 1),
        decoder_layers_per_block=(1, 1, 1, 1, 1),
        # LTX-Video's own compression: 4x4 patches, then three 2x halvings (32 pixels, 8
        # frames to a latent).
        spatio_temporal_scaling=(True, True, True, False),
        decoder_spatio_temporal_scaling=(True, True, True, False),
        patch_size=4,
    )
    transformer = LTXVideoTransformer3DModel(
        in_channels=8,
        out_channels=8,
        num_attention_heads=2,
        attention_head_dim=8,
        cross_attention_dim=16,
        num_layers=1,
        caption_channels=TEXT_DIM,
    )
    text_encoder = T5EncoderModel(T5Config(**TINY_TEXT, d_model=TEXT_DIM, d_ff=2 * TEXT_DIM))
    scheduler = FlowMatchEulerDiscreteScheduler(
        use_dynamic_shifting=True, base_image_seq_len=1024, max_image_seq_len=4096
    )
    return LTXPipeline(
        scheduler=scheduler,
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=word_tokenizer(max_length=32),
        transformer=transformer,
    )


def compose_wan(
    family: ModelFamily,
    common: dict[str, Any],
    expert: Callable[[int, int | None], Any],
    clip: Callable[[], tuple[Any, Any]],
) -> Any:
    """A Wan pipeline of `family` (not 2.1 text-to-video) from its parts: `common` (tokenizer,
    text encoder, VAE, scheduler), `expert(in_channels, image_dim)` making a transformer, and
    `clip()` Wan 2.1 image-to-video's image encoder and processor."""
    if family in (ModelFamily.WAN21_T2V, ModelFamily.LTX_VIDEO):
        raise ValueError(f"{family} is not composed here")
    if family is ModelFamily.WAN22_T2V:
        return WanPipeline(
            **common,
            transformer=expert(16, None),
            transformer_2=expert(16, None),
            boundary_ratio=T2V_BOUNDARY,
        )
    if family is ModelFamily.WAN21_I2V:
        encoder, processor = clip()
        return WanImageToVideoPipeline(
            **common,
            transformer=expert(36, int(encoder.config.hidden_size)),
            image_encoder=encoder,
            image_processor=processor,
        )
    return WanImageToVideoPipeline(
        **common,
        transformer=expert(36, None),
        transformer_2=expert(36, None),
        boundary_ratio=I2V_BOUNDARY,
    )


def _wan_pipeline(family: ModelFamily) -> Any:
    common = {
        "tokenizer": word_tokenizer(max_length=32),
        "text_encoder": tiny_umt5(TEXT_DIM),
        "vae": tiny_wan_vae(),
        "scheduler": FlowMatchEulerDiscreteScheduler(shift=3.0),
    }

    def expert(in_channels: int, image_dim: int | None) -> Any:
        return tiny_wan_transformer(in_channels=in_channels, image_dim=image_dim)

    return compose_wan(family, common, expert, _clip)


def build_tiny(family: ModelFamily, folder: Path, seed: int = 0) -> Path:
    """Write a random-weight pipeline of `family` to `folder` and return it."""
    if family is ModelFamily.WAN21_T2V:
        return build_tiny_wan(folder, seed=seed)
    torch.manual_seed(seed)
    pipe = _ltx() if family is ModelFamily.LTX_VIDEO else _wan_pipeline(family)
    folder.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(str(folder))
    return folder
