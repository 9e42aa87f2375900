"""LTX-Video: a T5 text encoder, a transformer over packed latents (one token per latent,
32x32 pixels and 8 frames each) with rotary positions scaled by the frame rate, a flow-matching
schedule shifted by the video's length (`mu`), and a VAE that may take a decode timestep.

It mirrors diffusers' `LTXPipeline.__call__`; the latents are kept unpacked between steps (the
scheduler's step is element-wise: the same bits in either layout), packed for each forward.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch
from diffusers import LTXPipeline
from diffusers.pipelines.ltx.pipeline_ltx import calculate_shift
from diffusers.utils.torch_utils import randn_tensor

from kernel.job_spec import JobSpec
from kernel.render_stage import RenderStage
from worker_ami.agent.denoise_state import DenoiseState
from worker_ami.agent.job_inputs import NO_INPUTS, JobInputs
from worker_ami.agent.renderer import TORCH_DTYPES, Conditioning, Renderer, attention_kernel

POSITIVE_MASK, NEGATIVE_MASK, FRAME_RATE = "positive_mask", "negative_mask", "frame_rate"
MAX_PROMPT_TOKENS = 128  # LTXPipeline's default max_sequence_length


class LtxRenderer(Renderer):
    family = "ltx-video"
    pipeline_class: ClassVar[Any] = LTXPipeline
    every_component = ("text_encoder", "transformer", "vae")
    stage_components: ClassVar[Mapping[RenderStage, tuple[str, ...]]] = {
        RenderStage.ENCODE: ("text_encoder",),
        RenderStage.DENOISE: ("transformer",),
        RenderStage.DECODE: ("vae",),
    }
    smoke_side = 32

    def encode(self, spec: JobSpec, inputs: JobInputs = NO_INPUTS) -> Conditioning:
        guided = spec.guidance > 1.0
        with torch.inference_mode():
            positive, positive_mask, negative, negative_mask = self._pipe.encode_prompt(
                prompt=spec.prompt,
                negative_prompt=spec.negative_prompt,
                do_classifier_free_guidance=guided,
                num_videos_per_prompt=1,
                max_sequence_length=MAX_PROMPT_TOKENS,
                device=self._device,
            )
        dtype = TORCH_DTYPES[self.recipe.dtypes.transformer]
        extras = {
            POSITIVE_MASK: positive_mask,
            FRAME_RATE: torch.tensor([float(spec.fps)], dtype=torch.float32),
        }
        if guided:
            extras[NEGATIVE_MASK] = negative_mask
        return Conditioning(positive.to(dtype), negative.to(dtype) if guided else None, extras)

    def _initial_latents(self, spec: JobSpec, generator: torch.Generator) -> torch.Tensor:
        pipe = self._pipe
        shape = (
            1,
            int(pipe.transformer.config.in_channels),
            (spec.num_frames - 1) // pipe.vae_temporal_compression_ratio + 1,
            spec.height // pipe.vae_spatial_compression_ratio,
            spec.width // pipe.vae_spatial_compression_ratio,
        )
        # As LTXPipeline.prepare_latents draws them (before it packs them).
        latents: torch.Tensor = randn_tensor(
            shape, generator=generator, device=self._device, dtype=torch.float32
        )
        return latents

    def _set_schedule(self, steps: int, latents: torch.Tensor) -> None:
        scheduler = self._pipe.scheduler
        frames, height, width = latents.shape[-3:]
        mu = calculate_shift(
            int(frames * height * width),
            scheduler.config.get("base_image_seq_len", 256),
            scheduler.config.get("max_image_seq_len", 4096),
            scheduler.config.get("base_shift", 0.5),
            scheduler.config.get("max_shift", 1.15),
        )
        sigmas = np.linspace(1.0, 1 / steps, steps)
        scheduler.set_timesteps(sigmas=sigmas, mu=mu, device=self._device)

    def _guided_noise(
        self, latents: torch.Tensor, t: torch.Tensor, cond: Conditioning, guidance: float
    ) -> torch.Tensor:
        pipe = self._pipe
        transformer = pipe.transformer
        frames, height, width = latents.shape[-3:]
        fps = float(cond.extras[FRAME_RATE][0])
        spatial = pipe.vae_spatial_compression_ratio
        rope_scale = (pipe.vae_temporal_compression_ratio / fps, spatial, spatial)
        patch, patch_t = pipe.transformer_spatial_patch_size, pipe.transformer_temporal_patch_size
        packed = LTXPipeline._pack_latents(latents, patch, patch_t).to(cond.positive.dtype)

        def forward(hidden: torch.Tensor, embeddings: torch.Tensor, mask: Any) -> torch.Tensor:
            output: torch.Tensor = transformer(
                hidden_states=hidden,
                encoder_hidden_states=embeddings,
                timestep=t.expand(hidden.shape[0]),
                encoder_attention_mask=mask,
                num_frames=frames,
                height=height,
                width=width,
                rope_interpolation_scale=rope_scale,
                return_dict=False,
            )[0]
            return output.float()

        masks = (cond.extras[POSITIVE_MASK], cond.extras.get(NEGATIVE_MASK))
        noise = self._cfg(forward, packed, cond, guidance, masks)
        unpacked: torch.Tensor = LTXPipeline._unpack_latents(
            noise, frames, height, width, patch, patch_t
        )
        return unpacked

    def decode(
        self, state: DenoiseState, tiled: bool | None = None
    ) -> np.ndarray[Any, np.dtype[np.uint8]]:
        """Latents to frames, shape (frames, height, width, 3), uint8; in tiles where the
        caller says (LTX's VAE tiles 512-pixel tiles at any size, so only on request)."""
        pipe = self._pipe
        vae = pipe.vae
        if tiled:
            vae.enable_tiling()
        else:
            vae.disable_tiling()
        generator = torch.Generator(device="cpu")
        generator.set_state(state.generator_state)
        with torch.inference_mode(), attention_kernel(self.recipe.attention):
            latents = state.latents.to(self._device, dtype=torch.float32)
            latents = LTXPipeline._denormalize_latents(
                latents, vae.latents_mean, vae.latents_std, vae.config.scaling_factor
            )
            # As LTXPipeline does: through the transformer's dtype on the way to the VAE's.
            latents = latents.to(TORCH_DTYPES[self.recipe.dtypes.transformer])
            timestep = None
            if vae.config.timestep_conditioning:
                # LTXPipeline's defaults: a decode timestep of 0 and the same noise scale,
                # the noise drawn from the job's generator where the steps left it.
                noise = randn_tensor(latents.shape, generator=generator, device=self._device)
                scale = torch.tensor([0.0], device=self._device)[:, None, None, None, None]
                latents = (1 - scale) * latents + scale * noise
                timestep = torch.tensor([0.0], device=self._device, dtype=vae.dtype)
            video = vae.decode(latents.to(vae.dtype), timestep, return_dict=False)[0]
            frames = pipe.video_processor.postprocess_video(video, output_type="np")[0]
        return np.asarray(np.round(np.clip(frames, 0.0, 1.0) * 255.0), dtype=np.uint8)
