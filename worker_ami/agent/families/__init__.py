"""The model families a worker renders, one module each; `renderer_class` picks a family's
renderer by the name the model registry gives it (`kernel.model_family.ModelFamily`)."""

from __future__ import annotations

from pathlib import Path

from kernel.model_family import ModelFamily
from kernel.render_stage import RenderStage
from worker_ami.agent.errors import JobFault
from worker_ami.agent.families.ltx import LtxRenderer
from worker_ami.agent.families.wan import (
    WanImageRenderer,
    WanRenderer,
    WanTwoExpertImageRenderer,
    WanTwoExpertRenderer,
)
from worker_ami.agent.recipe import RenderRecipe
from worker_ami.agent.renderer import Renderer

RENDERERS: dict[ModelFamily, type[Renderer]] = {
    ModelFamily.WAN21_T2V: WanRenderer,
    ModelFamily.WAN21_I2V: WanImageRenderer,
    ModelFamily.WAN22_T2V: WanTwoExpertRenderer,
    ModelFamily.WAN22_I2V: WanTwoExpertImageRenderer,
    ModelFamily.LTX_VIDEO: LtxRenderer,
}


def renderer_class(family: str) -> type[Renderer]:
    try:
        return RENDERERS[ModelFamily(family)]
    except ValueError:
        raise JobFault(f"model family {family!r} is not one this worker renders") from None


def load_renderer(
    model_dir: Path, device: str, recipe: RenderRecipe, stage: RenderStage | None = None
) -> Renderer:
    """The renderer of the recipe's model family, its pipeline loaded from `model_dir` (only
    the components `stage` runs, where given)."""
    return renderer_class(recipe.model_family).load(model_dir, device, recipe, stage)
