"""Time and GPU memory of a render's three stages (prompt encoding, denoising, decoding) and of a
denoising loop spread over several GPUs: what the split rule, the gang planner and the fleet
simulator price a render with, beside the step-time model (`kernel.step_time`).

Encoding: UMT5-XXL's encoder, one forward over 512 tokens per prompt (the prompt and the
negative prompt), about 2 x parameters x tokens FLOPs each: seconds on any GPU, but 11 GiB of
weights in bf16 that a render otherwise keeps on its denoising GPU for the whole render.

Decoding: the Wan VAE, kept in fp32, decodes every pixel of every frame through 3-D causal
convolutions. `VAE_FLOPS_PER_PIXEL_FRAME` is an estimate (a 720p, 81-frame decode of about 20 s
on an H100 in fp32, 40-50 s on an L4), not yet measured here; `benchmarks/gpu_step.py` measures
the denoising step only.

Spanning (context parallelism, Ulysses): each GPU holds the whole transformer and 1/N of the
video's tokens; every attention layer exchanges its query, key, value and output activations
all-to-all, each GPU sending (N-1)/N of its share. The exchange does not overlap compute here
(diffusers runs it inline), so a step on N GPUs takes 1/N of the compute plus the exchange at
the instance's GPU-to-GPU bandwidth (NVLink on p3.8xlarge, p4d, p5; PCIe elsewhere).
"""

from __future__ import annotations

from dataclasses import dataclass

from kernel.model_memory import (
    ACTIVATION_COPIES,
    BYTES,
    GIB,
    RUNTIME_GIB,
    TEXT_ENCODER_PARAMETERS,
    VAE_GIB,
)
from kernel.precision import Dtype
from kernel.step_time import TEXT_TOKENS, Architecture, compute_dtype, effective_tflops, tokens

VAE_FLOPS_PER_PIXEL_FRAME = 1.2e7
PROMPTS = 2  # the prompt and the negative prompt (classifier-free guidance)
PROMPT_TOKENS = TEXT_TOKENS * PROMPTS
EXCHANGES_PER_LAYER = 4  # query, key, value in; attention output back
# GPU-to-GPU bandwidth per instance type, GB/s one way per GPU, as sustained by NCCL's
# all-to-all (well under the link's peak): NVLink where the type has it, else PCIe.
NVLINK_GBPS = {"p3.8xlarge": 120.0, "p4d.24xlarge": 230.0, "p5.48xlarge": 350.0}
PCIE_GBPS = 20.0


@dataclass(frozen=True)
class Video:
    """What a render's cost depends on."""

    arch: Architecture
    width: int
    height: int
    frames: int
    steps: int
    guided: bool = True

    @property
    def tokens(self) -> int:
        return tokens(self.width, self.height, self.frames, self.arch)

    @property
    def pixel_frames(self) -> int:
        return self.width * self.height * self.frames


def link_gbps(instance_type: str) -> float:
    return NVLINK_GBPS.get(instance_type, PCIE_GBPS)


def encode_seconds(family: str) -> float:
    flops = 2 * TEXT_ENCODER_PARAMETERS * PROMPT_TOKENS
    return flops / (effective_tflops(family, compute_dtype(family)) * 1e12)


def decode_seconds(video: Video, family: str) -> float:
    """The VAE runs in fp32 (kernel.precision): its pace is the family's fp32 throughput."""
    flops = VAE_FLOPS_PER_PIXEL_FRAME * video.pixel_frames
    return flops / (effective_tflops(family, Dtype.FP32) * 1e12)


def exchange_seconds(video: Video, gpus: int, instance_type: str) -> float:
    """Seconds per step of the all-to-all exchanges of a step spread over `gpus` GPUs."""
    if gpus <= 1:
        return 0.0
    per_exchange = video.tokens * video.arch.width * BYTES[Dtype.BF16] * (gpus - 1) / gpus
    passes = 2 if video.guided else 1
    total = per_exchange * EXCHANGES_PER_LAYER * video.arch.layers * passes
    return total / (link_gbps(instance_type) * 1e9)


def span_step_seconds(
    video: Video, alone_step_seconds: float, gpus: int, instance_type: str
) -> float:
    """Seconds per denoising step on `gpus` GPUs of `instance_type`, from the step alone."""
    return alone_step_seconds / max(gpus, 1) + exchange_seconds(video, gpus, instance_type)


def denoise_need_gib(
    video: Video, dtype: Dtype, gpus: int = 1, with_text_encoder: bool = True
) -> float:
    """GPU memory per GPU of the denoising loop: the transformer whole on each GPU, its share
    of the activations, the VAE, and the text encoder unless encoding is a stage of its own."""
    weights = video.arch.parameters * video.arch.experts + (
        TEXT_ENCODER_PARAMETERS if with_text_encoder else 0.0
    )
    activations = ACTIVATION_COPIES * video.tokens * video.arch.width / max(gpus, 1)
    return (weights + activations) * BYTES[dtype] / GIB + VAE_GIB + RUNTIME_GIB


def encode_need_gib(dtype: Dtype) -> float:
    return TEXT_ENCODER_PARAMETERS * BYTES[dtype] / GIB + RUNTIME_GIB


# Frames with more pixels than 720p decode tiled (diffusers' `enable_tiling`, 256-pixel tiles
# blended over 64): what keeps a 1080p decode within a few GiB. The choice follows the frame
# size alone, never the GPU, so a render decodes to the same bits whole or as a stage, on
# whatever GPU it lands.
TILED_DECODE_PIXELS = 1280 * 720


def decode_tiled(width: int, height: int) -> bool:
    return width * height > TILED_DECODE_PIXELS


def decode_need_gib(video: Video) -> float:
    """The Wan VAE decodes one latent frame at a time (its causal cache carries the rest), and
    frames past 720p in tiles (`decode_tiled`): the working set stays at a few GiB."""
    return VAE_GIB + RUNTIME_GIB + min(6.0, video.pixel_frames * 4 * 8 / GIB)
