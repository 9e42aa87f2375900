"""The GPU benchmark's checks through real render processes (`ChildRenders`, as the agent runs
them): a cold job, a second job of the same model on the warm process, and a checkpoint resumed
in a fresh process, compared bit for bit with the uninterrupted render."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from kernel.job_spec import JobSpec
from worker_ami.agent.recipe import RenderRecipe
from worker_ami.agent.render_limits import RenderLimits
from worker_ami.agent.render_process import ChildRenders
from worker_ami.agent.state_codec import LATENTS, decode_state


async def child_checks(
    model_dir: Path, spec: JobSpec, chosen: RenderRecipe, device: str
) -> dict[str, Any]:
    """Real render processes: cold job, warm second job, resume in a fresh process."""
    bound = 1800.0
    scratch = Path(tempfile.mkdtemp(prefix="gpu-step-"))
    first = ChildRenders(device, RenderLimits(), scratch, spare=False)
    started = time.monotonic()
    session = await first.start("a")
    opened = await session.open(model_dir, chosen, spec, None, bound)
    await session.smoke(bound)
    await session.step(bound)
    cold = time.monotonic() - started
    while await session.step(bound) < spec.steps:
        pass
    _, finished = await session.checkpoint(bound)
    await first.give_back(session, "wan/t2v")

    started = time.monotonic()
    second = await first.start("b")
    warm_opened = await second.open(model_dir, chosen, spec, None, bound)
    await second.smoke(bound)
    step = await second.step(bound)
    warm = time.monotonic() - started
    while step < spec.steps // 2:
        step = await second.step(bound)
    _, halfway = await second.checkpoint(bound)
    await second.close()  # interrupted: the process is gone with the rest of its work
    await first.close()

    fresh = ChildRenders(device, RenderLimits(), scratch, spare=False)
    resumed = await fresh.start("b")
    await resumed.open(model_dir, chosen, spec, decode_state(halfway), bound)
    while await resumed.step(bound) < spec.steps:
        pass
    _, final = await resumed.checkpoint(bound)
    await fresh.close()
    return {
        "cold job: start to first step (s)": round(cold, 3),
        "cold job loaded the model": opened.loaded,
        "second job, same model: start to first step (s)": round(warm, 3),
        "second job loaded the model": warm_opened.loaded,
        "resume in a new process bit-equal": final[LATENTS] == finished[LATENTS],
        "resume recipe": chosen.describe(),
    }
