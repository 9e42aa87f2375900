"""The model families a worker renders, one module each; `renderer_class` picks a family's
renderer by the name the model registry gives it (`kernel.model_family.ModelFamily`), importing
its module then: a worker loads the diffusers pipelines of the families it renders only."""

from __future__ import annotations

import importlib
from pathlib import Path

from kernel.model_family import ModelFamily
from kernel.render_stage import RenderStage
from worker_ami.agent.errors import JobFault
from worker_ami.agent.recipe import RenderRecipe
from worker_ami.agent.renderer import Renderer

# Family -> (its module under worker_ami.agent.families, its renderer class).
RENDERERS: dict[ModelFamily, tuple[str, str]] = {
    ModelFamily.WAN21_T2V: ("wan", "WanRenderer"),
    ModelFamily.WAN21_I2V: ("wan_i2v", "WanImageRenderer"),
    ModelFamily.WAN22_T2V: ("wan", "WanTwoExpertRenderer"),
    ModelFamily.WAN22_I2V: ("wan_i2v", "WanTwoExpertImageRenderer"),
    ModelFamily.LTX_VIDEO: ("ltx", "LtxRenderer"),
}


def renderer_class(family: str) -> type[Renderer]:
    try:
        module, name = RENDERERS[ModelFamily(family)]
    except ValueError:
        raise JobFault(f"model family {family!r} is not one this worker renders") from None
    found: type[Renderer] = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    return found


def load_renderer(
    model_dir: Path, device: str, recipe: RenderRecipe, stage: RenderStage | None = None
) -> Renderer:
    """The renderer of the recipe's model family, its pipeline loaded from `model_dir` (only
    the components `stage` runs, where given)."""
    return renderer_class(recipe.model_family).load(model_dir, device, recipe, stage)
