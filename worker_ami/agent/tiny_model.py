"""A tiny random-weight Wan-style pipeline built from config: for tests, the demo and benchmarks
on machines without a real model or internet. It is saved with `save_pretrained` and loaded back
through the same code path as a real model.
"""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import (
    AutoencoderKLWan,
    FlowMatchEulerDiscreteScheduler,
    WanPipeline,
    WanTransformer3DModel,
)
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, UMT5Config, UMT5EncoderModel

VOCABULARY = [
    "<pad>",
    "</s>",
    "<unk>",
    "a",
    "an",
    "the",
    "of",
    "in",
    "on",
    "at",
    "with",
    "and",
    "to",
    "red",
    "blue",
    "green",
    "fox",
    "cat",
    "dog",
    "bird",
    "boat",
    "running",
    "flying",
    "walking",
    "swimming",
    "through",
    "over",
    "under",
    "snow",
    "rain",
    "city",
    "street",
    "forest",
    "sea",
    "waves",
    "night",
    "day",
    "blurry",
    "low",
    "quality",
    "cinematic",
    "macro",
    "time-lapse",
    "robot",
    "arm",
    "blocks",
    "flower",
]


def word_tokenizer(max_length: int) -> PreTrainedTokenizerFast:
    vocab = {word: index for index, word in enumerate(VOCABULARY)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=max_length,
    )


# What the tiny text encoders (UMT5 for Wan, T5 for LTX-Video) share.
TINY_TEXT = {
    "vocab_size": len(VOCABULARY),
    "d_kv": 8,
    "num_layers": 1,
    "num_heads": 2,
    "relative_attention_num_buckets": 8,
    "relative_attention_max_distance": 16,
}


def tiny_umt5(text_dim: int = 16) -> UMT5EncoderModel:
    """A one-layer UMT5 encoder over the tiny vocabulary (Wan's text encoder, at toy size)."""
    return UMT5EncoderModel(UMT5Config(**TINY_TEXT, d_model=text_dim, d_ff=2 * text_dim))


def tiny_wan_vae(base_dim: int = 3) -> AutoencoderKLWan:
    return AutoencoderKLWan(
        base_dim=base_dim,
        z_dim=16,
        dim_mult=[1, 1, 1, 1],
        num_res_blocks=1,
        temperal_downsample=[False, True, True],
    )


def tiny_wan_transformer(
    *,
    layers: int = 2,
    heads: int = 2,
    head_dim: int = 12,
    text_dim: int = 16,
    in_channels: int = 16,
    image_dim: int | None = None,
) -> WanTransformer3DModel:
    """`in_channels` 36 and an `image_dim`: an image-to-video transformer (the image's
    condition beside the noise; Wan 2.1's attends to its CLIP embeddings too)."""
    return WanTransformer3DModel(
        patch_size=(1, 2, 2),
        num_attention_heads=heads,
        attention_head_dim=head_dim,
        in_channels=in_channels,
        out_channels=16,
        text_dim=text_dim,
        freq_dim=256,
        ffn_dim=2 * heads * head_dim,
        num_layers=layers,
        cross_attn_norm=True,
        qk_norm="rms_norm_across_heads",
        rope_max_seq_len=32,
        image_dim=image_dim,
        added_kv_proj_dim=None if image_dim is None else heads * head_dim,
    )


def build_tiny_wan(
    folder: Path,
    *,
    layers: int = 2,
    heads: int = 2,
    head_dim: int = 12,
    vae_base_dim: int = 3,
    text_dim: int = 16,
    seed: int = 0,
) -> Path:
    """Write a random-weight WanPipeline to `folder` and return it."""
    torch.manual_seed(seed)
    text_encoder = tiny_umt5(text_dim)
    vae = tiny_wan_vae(vae_base_dim)
    transformer = tiny_wan_transformer(
        layers=layers, heads=heads, head_dim=head_dim, text_dim=text_dim
    )
    pipe = WanPipeline(
        tokenizer=word_tokenizer(max_length=32),
        text_encoder=text_encoder,
        vae=vae,
        scheduler=FlowMatchEulerDiscreteScheduler(shift=3.0),
        transformer=transformer,
    )
    folder.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(str(folder))
    return folder
