"""Seconds per denoising step from the model's size and the video's tokens, per GPU family and
dtype: the prior the autoscaler plans with until finished jobs correct it, and the pace the
simulator's GPUs keep.

A Wan-class video transformer patchifies the VAE's latents (8x spatial, 4x temporal compression,
then 2x2 patches): a 480x832 video of 81 frames is 21 x 30 x 52 = 32,760 tokens. One forward
costs about 2 x parameters x tokens for its matrix products plus 4 x layers x width x tokens^2
for self-attention (and 4 x layers x width x tokens x 512 for cross-attention to the prompt);
classifier-free guidance doubles it. The attention term is why a linear model in
pixels x frames underestimates long videos: 0.029 s per megapixel-frame at 33 frames, 0.040 at
81 on the same GPU (issue 28's measurements).

The GPU table is each family's dense tensor throughput in the dtype, times the share of it a
diffusion transformer reaches: 0.42 in bf16/fp16 (an H200 ran the 1.3B model at 392-440
TFLOP/s of its 989), 0.70 in plain fp32 (the same GPU's 3.14 s per step at 33 frames).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kernel.precision import Dtype, has_bf16

TEXT_TOKENS = 512
HALF_EFFICIENCY, FP32_EFFICIENCY = 0.42, 0.70


@dataclass(frozen=True)
class Architecture:
    """What sets a video transformer's cost: parameters, layers and width (of the expert
    that runs a step), and its family's geometry: pixels and frames per token, prompt tokens,
    and how many experts (each of `parameters`) it holds in memory."""

    parameters: float
    layers: int
    width: int
    pixels_per_token: int = 16  # Wan: the VAE's 8x8, then 2x2 patches
    frames_per_token: int = 4
    text_tokens: int = TEXT_TOKENS
    experts: int = 1


WAN_1_3B = Architecture(parameters=1.42e9, layers=30, width=1536)
WAN_14B = Architecture(parameters=14.3e9, layers=40, width=5120)
# Wan 2.2 A14B: two 14B experts (high noise, then low noise), one running at a time.
WAN_A14B = Architecture(parameters=14.3e9, layers=40, width=5120, experts=2)
# LTX-Video 2B: its VAE makes one token of 32x32 pixels and 8 frames; 128 prompt tokens.
LTX_2B = Architecture(
    parameters=1.9e9,
    layers=28,
    width=2048,
    pixels_per_token=32,
    frames_per_token=8,
    text_tokens=128,
)
KNOWN_MODELS: Mapping[str, Architecture] = {
    "wan/wan2.1-t2v-1.3b": WAN_1_3B,
    "wan/wan2.1-t2v-14b": WAN_14B,
    "wan/wan2.1-i2v-14b": WAN_14B,
    "wan/wan2.2-t2v-a14b": WAN_A14B,
    "wan/wan2.2-i2v-a14b": WAN_A14B,
    "lightricks/ltx-video": LTX_2B,
}
_SIZE_IN_NAME = re.compile(r"(\d+(?:\.\d+)?)b(?![a-z])")

# Dense tensor-core TFLOP/s per family: (bf16 or fp16, fp32 without TF32). Vendor figures.
PEAK_TFLOPS: Mapping[str, tuple[float, float]] = {
    "t4": (65.0, 8.1),
    "v100": (125.0, 15.7),
    "a10g": (70.0, 31.2),
    "l4": (121.0, 30.3),
    "l40s": (362.0, 91.6),
    "a100": (312.0, 19.5),
    "h100": (989.0, 67.0),
    "h200": (989.0, 67.0),
}
UNKNOWN_FAMILY = (65.0, 8.1)  # the slowest known: never optimistic about a GPU it cannot name


def architecture_of(model: str, known: Mapping[str, Architecture] = KNOWN_MODELS) -> Architecture:
    """The model's architecture: as configured, else from the size in its name ("…-14b"),
    else the small Wan's; the first finished jobs correct the guess."""
    if model in known:
        return known[model]
    name = model.lower()
    if "ltx" in name:
        return LTX_2B
    if "a14b" in name:
        return WAN_A14B
    match = _SIZE_IN_NAME.search(name)
    if match is None:
        return WAN_1_3B
    billions = float(match.group(1))
    return WAN_14B if billions >= 5 else Architecture(billions * 1e9, 30, 1536)


def tokens(width: int, height: int, frames: int, arch: Architecture = WAN_1_3B) -> int:
    """Transformer tokens of a video: latent frames x latent rows x latent columns (Wan: the
    VAE's 8x8 then 2x2 patches, 4 frames a latent; LTX-Video 32x32 and 8)."""
    latent_frames = (max(frames, 1) - 1) // arch.frames_per_token + 1
    side = arch.pixels_per_token
    return latent_frames * max(1, height // side) * max(1, width // side)


def step_flops(arch: Architecture, width: int, height: int, frames: int, guided: bool) -> float:
    n = tokens(width, height, frames, arch)
    forward = (
        2 * arch.parameters * n
        + 4 * arch.layers * arch.width * n * n
        + 4 * arch.layers * arch.width * n * arch.text_tokens
    )
    return forward * (2 if guided else 1)


def compute_dtype(family: str) -> Dtype:
    """What a Wan-class model computes in on this family by default (kernel.precision)."""
    return Dtype.BF16 if has_bf16(family) else Dtype.FP16


def effective_tflops(family: str, dtype: Dtype) -> float:
    half, fp32 = PEAK_TFLOPS.get(family, UNKNOWN_FAMILY)
    return fp32 * FP32_EFFICIENCY if dtype is Dtype.FP32 else half * HALF_EFFICIENCY


def step_seconds(
    arch: Architecture,
    width: int,
    height: int,
    frames: int,
    family: str,
    dtype: Dtype | None = None,
    guided: bool = True,
) -> float:
    flops = step_flops(arch, width, height, frames, guided)
    return flops / (effective_tflops(family, dtype or compute_dtype(family)) * 1e12)
