"""The stages a render may be split into (prompt encoding, denoising, decoding), in order, and
the GPU memory each needs. A job without a stage renders whole, in one attempt's process; a
split job runs one stage per attempt, each on a GPU that fits that stage alone, and hands
the next its tensors through a checkpoint in S3 (see `worker_ami.agent.stages`).
"""

from __future__ import annotations

from enum import StrEnum

from kernel.job_spec import JobSpec
from kernel.model_memory import BUILT_IN, gpu_need_gib, resolution_class
from kernel.precision import Dtype
from kernel.stage_cost import (
    Video,
    decode_need_gib,
    denoise_need_gib,
    encode_need_gib,
)
from kernel.step_time import architecture_of


class RenderStage(StrEnum):
    ENCODE = "encode"
    DENOISE = "denoise"
    DECODE = "decode"

    @property
    def following(self) -> RenderStage | None:
        """The stage after this one; None after decoding (the video is the job's end)."""
        return _FOLLOWING[self]


_FOLLOWING = {
    RenderStage.ENCODE: RenderStage.DENOISE,
    RenderStage.DENOISE: RenderStage.DECODE,
    RenderStage.DECODE: None,
}


def warm_key(model: str, stage: RenderStage | None) -> str:
    """What a GPU holds loaded between jobs, as the scheduler matches it to a job: the model's
    whole pipeline, or a stage's components of it (a GPU warm with a model's text encoder
    serves the next job's encoding stage without a load, and no other stage of it)."""
    return model if stage is None else f"{model} [{stage.value}]"


def video_of(spec: JobSpec) -> Video:
    return Video(
        architecture_of(spec.model),
        spec.width,
        spec.height,
        spec.num_frames,
        spec.steps,
        guided=spec.guidance > 1.0,
    )


def stage_need_gib(spec: JobSpec, stage: RenderStage | None, dtype: Dtype = Dtype.BF16) -> float:
    """The GPU memory the job's next attempt needs: the whole render's (`gpu_need_gib`), or
    its stage's alone. The denoising stage of a model the registry has not measured keeps the
    producer's figure: without a measurement nothing says how much the encoder's absence
    frees."""
    if stage is None:
        return gpu_need_gib(spec, dtype)
    if stage is RenderStage.ENCODE:
        return round(encode_need_gib(dtype), 1)
    video = video_of(spec)
    if stage is RenderStage.DECODE:
        return round(decode_need_gib(video), 1)
    resolution = resolution_class(spec.width, spec.height)
    if resolution is None or (spec.model, dtype, resolution) not in BUILT_IN:
        return gpu_need_gib(spec, dtype)
    return round(denoise_need_gib(video, dtype, spec.gpu.count, with_text_encoder=False), 1)
