"""How a job's steps are computed beyond its spec and model: the dtypes, the GPU family, the
classifier-free guidance layout and the attention kernel. Each of these changes the bits of the
latents, so a checkpoint records the recipe it was made with and a resume compares it.

The rule (README, "Exact resume"): a checkpoint in another compute dtype is never resumed in
the middle of denoising (the denoising would mix two arithmetics); at a stage boundary, where
nothing is left to compute in the dtype it was made in (the prompt's embeddings alone, or
every step done), it is cast to this worker's dtype, and the record says so. One from another
GPU family or recipe resumes only for a job that did not ask for `exact`, and its record then
says the video may differ from an uninterrupted render.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kernel.model_family import ModelFamily
from kernel.precision import ComponentDtypes, Precision, resolve_dtypes

# "batched": the conditional and unconditional passes as one forward of batch 2, "sequential":
# two forwards, as diffusers' WanPipeline does. Each is deterministic; they differ in the last
# bits (the matrix products tile another way), so the choice is part of the recipe.
CfgLayout = Literal["batched", "sequential"]
# The scaled-dot-product-attention kernel tried first ("default": PyTorch's own choice, which
# may change with its version; the CPU's).
AttentionKernel = Literal["default", "flash", "cudnn", "efficient", "math"]


class RenderRecipe(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    dtypes: ComponentDtypes
    gpu_family: str = Field(pattern=r"^[a-z0-9]{1,16}$")
    cfg: CfgLayout
    attention: AttentionKernel
    # The transformer's repeated blocks compiled (torch.compile, regional): fused kernels may
    # round differently from eager ones, so it is part of the recipe. Off unless the worker's
    # `render_compile` says so (benchmarks/gpu_step.py measures it, its warm-up counted).
    compiled: bool = False
    # The model's family (the registry's): which renderer steps it. A checkpoint made before
    # families were recorded was made by Wan 2.1 text-to-video, the only one then.
    model_family: ModelFamily = ModelFamily.WAN21_T2V

    def resume_refusal(
        self, made_with: RenderRecipe, exact: bool, boundary: bool = False
    ) -> str | None:
        """Why a checkpoint made with `made_with` may not be resumed under this recipe, if so.
        `boundary`: it holds nothing mid-denoising (embeddings alone, or every step done)."""
        if made_with.model_family is not self.model_family:
            return (
                f"checkpoint made by a {made_with.model_family} model, "
                f"this one is {self.model_family}"
            )
        if made_with.dtypes.compute is not self.dtypes.compute and not boundary:
            return (
                f"checkpoint computed in {made_with.dtypes.compute}, this worker computes in "
                f"{self.dtypes.compute}: a resume would mix two arithmetics"
            )
        if exact and made_with != self:
            return f"exact job: checkpoint made with {made_with.describe()}, here {self.describe()}"
        return None

    def differs_from(self, made_with: RenderRecipe) -> str | None:
        """A note for the job's record when a resume crosses recipes (allowed, not exact)."""
        if made_with == self:
            return None
        return (
            f"resumed on {self.describe()} from a checkpoint made with {made_with.describe()}: "
            "the video may differ from an uninterrupted render"
        )

    def boundary_cast(self, made_with: RenderRecipe) -> str | None:
        """The note for a stage boundary crossed between dtypes (a deliberate cast)."""
        if made_with.dtypes.compute is self.dtypes.compute:
            return None
        return (
            f"stage boundary: tensors made in {made_with.dtypes.compute} on "
            f"{made_with.gpu_family} cast to {self.dtypes.compute} here"
        )

    def describe(self) -> str:
        compiled = ", compiled" if self.compiled else ""
        return (
            f"{self.gpu_family} {self.dtypes.compute} (cfg {self.cfg}, {self.attention}{compiled})"
        )


def recipe_for(
    precision: Precision,
    device: str,
    family: str,
    cfg: CfgLayout | None = None,
    attention: AttentionKernel | None = None,
    compiled: bool = False,
    model_family: ModelFamily = ModelFamily.WAN21_T2V,
) -> RenderRecipe:
    """The recipe a worker uses for a model: the registry's precision resolved on this device;
    on a GPU batched guidance and flash attention (benchmarks/gpu_step.py measured them), on a
    CPU PyTorch's defaults and two passes (half the memory of a batch of two)."""
    on_gpu = device.startswith("cuda")
    return RenderRecipe(
        dtypes=resolve_dtypes(precision, device, family),
        gpu_family=family,
        cfg=cfg or ("batched" if on_gpu else "sequential"),
        attention=attention or ("flash" if on_gpu else "default"),
        compiled=compiled,
        model_family=model_family,
    )
