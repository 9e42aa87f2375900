"""The Wan image-to-video families (2.1 with its CLIP image encoder, 2.2 with two experts): the
input image's latents, VAE-encoded at the encoding stage, concatenated to the noise at every
step; Wan 2.1's transformer also attends to the image's CLIP embeddings. Mirrors diffusers'
`WanImageToVideoPipeline.__call__` step for step. A module of its own: a worker rendering
text-to-video never imports the image pipeline (nor transformers' CLIP).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from diffusers import WanImageToVideoPipeline

from kernel.job_spec import JobSpec
from kernel.render_stage import RenderStage
from worker_ami.agent.errors import JobFault
from worker_ami.agent.families.wan import CONDITION, IMAGE_EMBEDS, WanRenderer
from worker_ami.agent.job_inputs import NO_INPUTS, JobInputs
from worker_ami.agent.renderer import TORCH_DTYPES, Conditioning


class WanImageRenderer(WanRenderer):
    """Image-to-video: the encoding stage also runs the VAE's encoder over the input image
    (and, for Wan 2.1, the CLIP image encoder)."""

    family = "wan2.1-i2v"
    pipeline_class: ClassVar[Any] = WanImageToVideoPipeline
    every_component = (
        "text_encoder",
        "image_encoder",
        "image_processor",
        "transformer",
        "transformer_2",
        "vae",
    )
    stage_components: ClassVar[Mapping[RenderStage, tuple[str, ...]]] = {
        RenderStage.ENCODE: ("text_encoder", "image_encoder", "image_processor", "vae"),
        RenderStage.DENOISE: ("transformer", "transformer_2"),
        RenderStage.DECODE: ("vae",),
    }

    def encode(self, spec: JobSpec, inputs: JobInputs = NO_INPUTS) -> Conditioning:
        from PIL import Image, UnidentifiedImageError

        positive, negative = self._prompt(spec)
        if inputs.image is None:
            raise JobFault("an image-to-video job came without its input image")
        try:
            with Image.open(inputs.image) as opened:
                image = opened.convert("RGB")
        except (OSError, UnidentifiedImageError, ValueError) as error:
            raise JobFault(f"input image unreadable: {error}") from None
        return Conditioning(positive, negative, self._image_extras(spec, image))

    def _image_extras(self, spec: JobSpec, image: Any) -> dict[str, torch.Tensor]:
        pipe = self._pipe
        extras: dict[str, torch.Tensor] = {}
        dtype = TORCH_DTYPES[self.recipe.dtypes.transformer]
        with torch.inference_mode():
            if getattr(pipe, "image_encoder", None) is not None:
                extras[IMAGE_EMBEDS] = pipe.encode_image(image, self._device).to(dtype)
            pixels = pipe.video_processor.preprocess(image, height=spec.height, width=spec.width)
            pixels = pixels.to(self._device, dtype=torch.float32)
            # The noise itself is drawn from the seed in `initial_state`; the condition takes
            # no randomness (the VAE's encoding in "argmax" mode), so a throwaway generator.
            _, condition = pipe.prepare_latents(
                pixels,
                1,
                pipe.vae.config.z_dim,
                spec.height,
                spec.width,
                spec.num_frames,
                torch.float32,
                self._device,
                torch.Generator(device="cpu").manual_seed(0),
                None,
                None,
            )
        extras[CONDITION] = condition.detach()
        return extras

    def _model_input(self, latents: torch.Tensor, cond: Conditioning) -> torch.Tensor:
        condition = cond.extras.get(CONDITION)
        if condition is None or condition.shape[2:] != latents.shape[2:]:
            raise JobFault("image condition missing or of another shape than the latents")
        return torch.cat([latents, condition.to(latents.device)], dim=1)

    def smoke_conditioning(self, tiny: JobSpec, stored: Conditioning | None) -> Conditioning:
        """The tiny step's condition: zeros of its shape (the job's own is the video's), beside
        the stored or the tiny prompt's embeddings."""
        text = stored or Conditioning(*self._prompt(tiny))
        latents = self.initial_state(tiny).latents
        channels = self._experts()[0].config.in_channels - latents.shape[1]
        zeros = torch.zeros(1, channels, *latents.shape[2:], device=self._device)
        extras = {CONDITION: zeros}
        if IMAGE_EMBEDS in text.extras:
            extras[IMAGE_EMBEDS] = text.extras[IMAGE_EMBEDS]
        elif self._experts()[0].config.image_dim is not None:
            image_dim = int(self._experts()[0].config.image_dim)
            extras[IMAGE_EMBEDS] = torch.zeros(1, 1, image_dim, device=self._device)
            extras[IMAGE_EMBEDS] = extras[IMAGE_EMBEDS].to(self._experts()[0].dtype)
        return Conditioning(text.positive, text.negative, extras)


class WanTwoExpertImageRenderer(WanImageRenderer):
    family = "wan2.2-i2v"
