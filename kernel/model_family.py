"""The model families FrameFleet renders, and what the control plane must know of each before a
job costs a boot: its inputs (an image or not), the frame sizes and counts it takes, its
experts, and the architecture its step time and memory need are estimated from.

The worker's side of a family (how its pipeline loads, steps and decodes) is one module under
`worker_ami/agent/families/`; adding a family adds that module and a row here (and, where its
tokens or experts differ from Wan's, an `Architecture` in `kernel/step_time.py` that the step
time and memory estimates read). The model registry names each model's family
(`ModelEntry.family`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ModelFamily(StrEnum):
    WAN21_T2V = "wan2.1-t2v"
    WAN21_I2V = "wan2.1-i2v"
    WAN22_T2V = "wan2.2-t2v"
    WAN22_I2V = "wan2.2-i2v"
    LTX_VIDEO = "ltx-video"


@dataclass(frozen=True)
class FamilyTraits:
    """What a family takes and how it is shaped, as the door and the fleet see it."""

    image_input: bool  # image-to-video: the job must name an input image
    size_multiple: int  # width and height are multiples of it (the VAE's and patches' stride)
    frames_step: int  # num_frames is 1 + a multiple of it (the VAE's temporal compression)
    experts: int  # transformers that take turns over the steps (Wan 2.2: high, then low noise)

    def shape_refusal(
        self, family: ModelFamily, width: int, height: int, frames: int
    ) -> str | None:
        """Why this family cannot render a video of this shape, if it cannot."""
        if width % self.size_multiple or height % self.size_multiple:
            return (
                f"{family} renders widths and heights in multiples of {self.size_multiple}, "
                f"not {width}x{height}"
            )
        if (frames - 1) % self.frames_step:
            return f"{family} renders 1 + a multiple of {self.frames_step} frames, not {frames}"
        return None


_WAN = FamilyTraits(
    image_input=False,
    size_multiple=16,
    frames_step=4,
    experts=1,
)
TRAITS: dict[ModelFamily, FamilyTraits] = {
    ModelFamily.WAN21_T2V: _WAN,
    ModelFamily.WAN21_I2V: FamilyTraits(**{**_WAN.__dict__, "image_input": True}),
    ModelFamily.WAN22_T2V: FamilyTraits(**{**_WAN.__dict__, "experts": 2}),
    ModelFamily.WAN22_I2V: FamilyTraits(**{**_WAN.__dict__, "image_input": True, "experts": 2}),
    # LTX-Video's VAE compresses 32x32 pixels and 8 frames into one latent, one token each.
    ModelFamily.LTX_VIDEO: FamilyTraits(
        image_input=False, size_multiple=32, frames_step=8, experts=1
    ),
}


def traits_of(family: ModelFamily) -> FamilyTraits:
    return TRAITS[family]


def option_refusal(
    family: ModelFamily, image: str | None, width: int, height: int, frames: int
) -> str | None:
    """Why a job cannot be rendered by a model of `family`: an image it does not take (or the
    one it needs, missing), or a shape it cannot make."""
    traits = TRAITS[family]
    if image is not None and not traits.image_input:
        return f"{family} is text-to-video: it takes no input image (an image-to-video model does)"
    if image is None and traits.image_input:
        return f"{family} is image-to-video: the job must name its input image (image)"
    return traits.shape_refusal(family, width, height, frames)
