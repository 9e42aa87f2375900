"""A model's GPU memory need per dtype and resolution class: a job's GPU need comes from it,
and a producer's `gpu.min_vram_gib` can only raise it.

The worker keeps the whole pipeline on its GPU: the transformer's and the text encoder's
weights in the compute dtype (UMT5-XXL's 5.7B parameters for a Wan-class model), the VAE in
fp32, and one transformer block's activations over the video's tokens. `estimated_need_gib`
states that; `BUILT_IN` records what it gives for the Wan 2.1 14B model, which no 24 GB GPU
holds (the 1.3B model's need is left to the producer until measured on the GPUs it runs on:
the estimate puts it right at a 16-24 GB boundary). Replace these with measured peaks
(`torch.cuda.max_memory_allocated` around a render) as GPU runs come in: the registry's
`memory_gib` of an entry takes precedence (`model_need_gib`).

A model no figure covers (a fine-tune under a name of its own) is estimated from its published
weights' size, never below the weights: a 14B fine-tune named "acme/trailer-ft" needs what its
28 GiB of transformer weights and its activations take, not a default of 16 GiB.
"""

from __future__ import annotations

from collections.abc import Mapping

from kernel.job_spec import JobSpec
from kernel.model_family import ModelFamily
from kernel.precision import Dtype
from kernel.step_time import (
    KNOWN_MODELS,
    LTX_2B,
    WAN_14B,
    WAN_A14B,
    Architecture,
    architecture_of,
    tokens,
)

GIB = 2**30
TEXT_ENCODER_PARAMETERS = 5.7e9  # UMT5-XXL's encoder
VAE_GIB = 0.5  # the Wan VAE's weights in fp32 and its decode of one chunk
ACTIVATION_COPIES = 24  # tokens x width per transformer block in flight, attention included
RUNTIME_GIB = 1.5  # the CUDA context and the allocator's slack
BYTES = {Dtype.BF16: 2, Dtype.FP16: 2, Dtype.FP32: 4}
# Resolution classes by pixels per frame (each at up to 81 frames), the largest of each.
RESOLUTION_CLASSES = (("480p", 832, 480), ("720p", 1280, 720), ("1080p", 1920, 1088))
CLASS_FRAMES = 81


def resolution_class(width: int, height: int) -> str | None:
    """The smallest class that holds the frame; None: larger than every class."""
    for name, class_width, class_height in RESOLUTION_CLASSES:
        if width * height <= class_width * class_height:
            return name
    return None


def estimated_need_gib(
    arch: Architecture, width: int, height: int, frames: int, dtype: Dtype
) -> float:
    # Every expert stays loaded (Wan 2.2 keeps both on the GPU), one runs at a time.
    weights = (arch.parameters * arch.experts + TEXT_ENCODER_PARAMETERS) * BYTES[dtype]
    activations = (
        ACTIVATION_COPIES * tokens(width, height, frames, arch) * arch.width * BYTES[dtype]
    )
    return round((weights + activations) / GIB + VAE_GIB + RUNTIME_GIB, 1)


def _class_needs(model: str, arch: Architecture) -> dict[tuple[str, Dtype, str], float]:
    return {
        (model, dtype, name): estimated_need_gib(arch, width, height, CLASS_FRAMES, dtype)
        for name, width, height in RESOLUTION_CLASSES
        for dtype in (Dtype.BF16, Dtype.FP32)
    }


# A family's token geometry and experts, for a model its name does not place.
FAMILY_SHAPES: Mapping[ModelFamily, Architecture] = {
    ModelFamily.WAN22_T2V: WAN_A14B,
    ModelFamily.WAN22_I2V: WAN_A14B,
    ModelFamily.LTX_VIDEO: LTX_2B,
}
# (model, compute dtype, resolution class) -> GiB of GPU memory its render needs.
BUILT_IN: Mapping[tuple[str, Dtype, str], float] = {
    **_class_needs("wan/wan2.1-t2v-14b", WAN_14B),
    **_class_needs("wan/wan2.2-t2v-a14b", WAN_A14B),
    **_class_needs("wan/wan2.2-i2v-a14b", WAN_A14B),
}


def model_need_gib(
    model: str,
    width: int,
    height: int,
    dtype: Dtype,
    measured: Mapping[str, float] | None = None,
    weights: int | None = None,
    family: ModelFamily = ModelFamily.WAN21_T2V,
) -> float | None:
    """What a render of `model` (of `family`) needs at this frame size (its resolution class,
    up to 81 frames) in `dtype`: the registry's measured figure, else the built-in one, else an
    estimate from the published weights' size (`weights`, bytes; cast up where the dtype is
    wider than half precision, never below the weights) plus the activations; None when
    nothing is known (only the producer's figure counts then)."""
    resolution = resolution_class(width, height)
    if resolution is None:
        return None
    found = (measured or {}).get(f"{dtype.value}/{resolution}")
    if found is None:
        found = BUILT_IN.get((model, dtype, resolution))
    if found is not None or weights is None:
        return found
    arch = architecture_of(model)
    if model not in KNOWN_MODELS and family in FAMILY_SHAPES:
        arch = FAMILY_SHAPES[family]  # a fine-tune under a name of its own: its family's
    if weights / 2 > 1.5 * (arch.parameters * arch.experts + TEXT_ENCODER_PARAMETERS):
        arch = WAN_14B  # weights far past its name's size: taken for the largest known
    _, class_width, class_height = next(c for c in RESOLUTION_CLASSES if c[0] == resolution)
    held = weights * max(1.0, BYTES[dtype] / 2)
    activations = (
        ACTIVATION_COPIES * tokens(class_width, class_height, CLASS_FRAMES, arch) * arch.width
    ) * BYTES[dtype]
    return round((held + activations) / GIB + VAE_GIB + RUNTIME_GIB, 1)


def gpu_need_gib(
    spec: JobSpec,
    dtype: Dtype = Dtype.BF16,
    needs: Mapping[tuple[str, Dtype, str], float] = BUILT_IN,
) -> float:
    """The GPU memory the job needs: the registry's figure for its model, dtype (what every
    GPU the autoscaler buys computes in: half precision) and resolution class, or the
    producer's where that is more, or where the registry has none."""
    resolution = resolution_class(spec.width, spec.height)
    recorded = needs.get((spec.model, dtype, resolution)) if resolution else None
    if recorded is not None and spec.gpu.count > 1:
        recorded = span_share_gib(recorded, spec, dtype)
    return max(spec.gpu.min_vram_gib, recorded or 0.0)


def span_share_gib(whole_gib: float, spec: JobSpec, dtype: Dtype) -> float:
    """Each GPU's need when the render spans `spec.gpu.count` of them: the weights whole on
    every GPU, the activations divided among them (context parallelism splits the tokens)."""
    arch = architecture_of(spec.model)
    activations = (
        (ACTIVATION_COPIES * tokens(spec.width, spec.height, spec.num_frames, arch) * arch.width)
        * BYTES[dtype]
        / GIB
    )
    return round(whole_gib - activations * (1 - 1 / spec.gpu.count), 1)
