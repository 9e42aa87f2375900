"""Tiny random-weight pipelines of every model family but Wan 2.1 text-to-video (`tiny_model`),
built from diffusers' own classes and configs at toy sizes: Wan 2.2's two experts, Wan 2.1 and
2.2 image-to-video, LTX-Video. For tests, the demo and benchmarks without weights or internet;
saved with `save_pretrained` and loaded back through the worker's own loader.
"""

from __future__ import annotations

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

from kernel.model_family import ModelFamily
from worker_ami.agent.tiny_model import VOCABULARY, build_tiny_wan, word_tokenizer

TEXT_DIM = 16
# Where Wan 2.2's 14B models hand over from the high-noise expert to the low-noise one.
T2V_BOUNDARY, I2V_BOUNDARY = 0.875, 0.9


def _umt5() -> UMT5EncoderModel:
    return UMT5EncoderModel(
        UMT5Config(
            vocab_size=len(VOCABULARY),
            d_model=TEXT_DIM,
            d_kv=8,
            d_ff=2 * TEXT_DIM,
            num_layers=1,
            num_heads=2,
            relative_attention_num_buckets=8,
            relative_attention_max_distance=16,
        )
    )


def _wan_vae() -> AutoencoderKLWan:
    return AutoencoderKLWan(
        base_dim=3,
        z_dim=16,
        dim_mult=[1, 1, 1, 1],
        num_res_blocks=1,
        temperal_downsample=[False, True, True],
    )


def _wan_transformer(in_channels: int = 16, image_dim: int | None = None) -> WanTransformer3DModel:
    heads, head_dim = 2, 12
    return WanTransformer3DModel(
        patch_size=(1, 2, 2),
        num_attention_heads=heads,
        attention_head_dim=head_dim,
        in_channels=in_channels,
        out_channels=16,
        text_dim=TEXT_DIM,
        freq_dim=256,
        ffn_dim=2 * heads * head_dim,
        num_layers=2,
        cross_attn_norm=True,
        qk_norm="rms_norm_across_heads",
        rope_max_seq_len=32,
        image_dim=image_dim,
        added_kv_proj_dim=None if image_dim is None else heads * head_dim,
    )


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
    text_encoder = T5EncoderModel(
        T5Config(
            vocab_size=len(VOCABULARY),
            d_model=TEXT_DIM,
            d_kv=8,
            d_ff=2 * TEXT_DIM,
            num_layers=1,
            num_heads=2,
            relative_attention_num_buckets=8,
        )
    )
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


def _wan_pipeline(family: ModelFamily) -> Any:
    common = {
        "tokenizer": word_tokenizer(max_length=32),
        "text_encoder": _umt5(),
        "vae": _wan_vae(),
        "scheduler": FlowMatchEulerDiscreteScheduler(shift=3.0),
    }
    if family is ModelFamily.WAN22_T2V:
        return WanPipeline(
            **common,
            transformer=_wan_transformer(),
            transformer_2=_wan_transformer(),
            boundary_ratio=T2V_BOUNDARY,
        )
    if family is ModelFamily.WAN21_I2V:
        encoder, processor = _clip()
        return WanImageToVideoPipeline(
            **common,
            transformer=_wan_transformer(in_channels=36, image_dim=TEXT_DIM),
            image_encoder=encoder,
            image_processor=processor,
        )
    return WanImageToVideoPipeline(
        **common,
        transformer=_wan_transformer(in_channels=36),
        transformer_2=_wan_transformer(in_channels=36),
        boundary_ratio=I2V_BOUNDARY,
    )


def build_tiny(family: ModelFamily, folder: Path, seed: int = 0) -> Path:
    """Write a random-weight pipeline of `family` to `folder` and return it."""
    if family is ModelFamily.WAN21_T2V:
        return build_tiny_wan(folder, seed=seed)
    torch.manual_seed(seed)
    pipe = _ltx() if family is ModelFamily.LTX_VIDEO else _wan_pipeline(family)
    folder.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(str(folder))
    return folder
