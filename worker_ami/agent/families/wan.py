"""The Wan text-to-video families: 2.1 (one transformer) and 2.2 (two experts, the first for
high noise and the second for low, switching at the pipeline's `boundary_ratio`), mirroring
diffusers' `WanPipeline.__call__` step for step. Image-to-video builds on it (`wan_i2v.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch
from diffusers import WanPipeline

from kernel.job_spec import JobSpec
from kernel.render_stage import RenderStage
from kernel.stage_cost import decode_tiled
from worker_ami.agent.denoise_state import DenoiseState
from worker_ami.agent.errors import JobFault
from worker_ami.agent.job_inputs import NO_INPUTS, JobInputs
from worker_ami.agent.renderer import (
    MAX_SEQUENCE_LENGTH,
    TORCH_DTYPES,
    Conditioning,
    Renderer,
    attention_kernel,
)

CONDITION, IMAGE_EMBEDS = "condition", "image_embeds"


class WanRenderer(Renderer):
    family = "wan2.1-t2v"
    pipeline_class: ClassVar[Any] = WanPipeline
    every_component: ClassVar[tuple[str, ...]] = (
        "text_encoder",
        "transformer",
        "transformer_2",
        "vae",
    )
    stage_components: ClassVar[Mapping[RenderStage, tuple[str, ...]]] = {
        RenderStage.ENCODE: ("text_encoder",),
        RenderStage.DENOISE: ("transformer", "transformer_2"),
        RenderStage.DECODE: ("vae",),
    }

    def _experts(self) -> list[Any]:
        return [
            expert
            for expert in (self._pipe.transformer, getattr(self._pipe, "transformer_2", None))
            if expert is not None
        ]

    @property
    def max_sequence_length(self) -> int:
        limit = getattr(self._pipe.tokenizer, "model_max_length", MAX_SEQUENCE_LENGTH)
        return int(min(limit, MAX_SEQUENCE_LENGTH))

    def _prompt(self, spec: JobSpec) -> tuple[torch.Tensor, torch.Tensor | None]:
        with torch.inference_mode():
            positive, negative = self._pipe.encode_prompt(
                prompt=spec.prompt,
                negative_prompt=spec.negative_prompt,
                do_classifier_free_guidance=spec.guidance > 1.0,
                num_videos_per_prompt=1,
                max_sequence_length=self.max_sequence_length,
                device=self._device,
            )
        # The transformer's dtype as the recipe gives it: a prompt-encoding stage has no
        # transformer loaded.
        dtype = TORCH_DTYPES[self.recipe.dtypes.transformer]
        return positive.to(dtype), None if negative is None else negative.to(dtype)

    def encode(self, spec: JobSpec, inputs: JobInputs = NO_INPUTS) -> Conditioning:
        positive, negative = self._prompt(spec)
        return Conditioning(positive, negative)

    def _initial_latents(self, spec: JobSpec, generator: torch.Generator) -> torch.Tensor:
        # The noise has the channels the transformer predicts (an image-to-video transformer
        # takes more: the image's condition beside them).
        channels = int(self._experts()[0].config.out_channels)
        latents: torch.Tensor = WanPipeline.prepare_latents(
            self._pipe,
            1,
            channels,
            spec.height,
            spec.width,
            spec.num_frames,
            torch.float32,
            self._device,
            generator,
            None,
        )
        return latents

    def expert_at(self, t: torch.Tensor) -> int:
        ratio = self._pipe.config.boundary_ratio
        if ratio is None:
            return 0
        boundary = ratio * self._pipe.scheduler.config.num_train_timesteps
        return 0 if bool(t >= boundary) else 1

    def _model_input(self, latents: torch.Tensor, cond: Conditioning) -> torch.Tensor:
        return latents

    def _guided_noise(
        self, latents: torch.Tensor, t: torch.Tensor, cond: Conditioning, guidance: float
    ) -> torch.Tensor:
        experts = self._experts()
        if not experts:
            raise JobFault("no transformer loaded to denoise with")
        expert = experts[self.expert_at(t)]
        model_input = self._model_input(latents, cond).to(expert.dtype)
        image = cond.extras.get(IMAGE_EMBEDS)
        if image is not None:  # made by an image encoder in another dtype, perhaps
            image = image.to(expert.dtype)

        def forward(hidden: torch.Tensor, embeddings: torch.Tensor, _: Any) -> torch.Tensor:
            # Wan 2.1's image embeddings, once per guidance pass of the batch.
            batch = hidden.shape[0]
            extra = (
                {}
                if image is None
                else {"encoder_hidden_states_image": image.expand(batch, -1, -1)}
            )
            output: torch.Tensor = expert(
                hidden_states=hidden,
                timestep=t.expand(hidden.shape[0]),
                encoder_hidden_states=embeddings,
                return_dict=False,
                **extra,
            )[0]
            return output

        return self._cfg(forward, model_input, cond, guidance)

    def decode(
        self, state: DenoiseState, tiled: bool | None = None
    ) -> np.ndarray[Any, np.dtype[np.uint8]]:
        """Latents to frames, shape (frames, height, width, 3), uint8; in tiles where the
        frame size says (`kernel.stage_cost.decode_tiled`), unless `tiled` says otherwise."""
        pipe = self._pipe
        vae = pipe.vae
        ratio = int(vae.spatial_compression_ratio)
        height, width = (int(side) * ratio for side in state.latents.shape[-2:])
        if tiled if tiled is not None else decode_tiled(width, height):
            vae.enable_tiling()
        else:
            vae.disable_tiling()
        with torch.inference_mode(), attention_kernel(self.recipe.attention):
            latents = state.latents.to(self._device, dtype=vae.dtype)
            z_dim = vae.config.z_dim
            mean = torch.tensor(vae.config.latents_mean).view(1, z_dim, 1, 1, 1).to(latents)
            inv_std = 1.0 / torch.tensor(vae.config.latents_std).view(1, z_dim, 1, 1, 1).to(latents)
            video = vae.decode(latents / inv_std + mean, return_dict=False)[0]
            frames = pipe.video_processor.postprocess_video(video, output_type="np")[0]
        return np.asarray(np.round(np.clip(frames, 0.0, 1.0) * 255.0), dtype=np.uint8)


class WanTwoExpertRenderer(WanRenderer):
    family = "wan2.2-t2v"
