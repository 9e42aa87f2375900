"""One render process of a render spanning several (CPU) processes, as the context-parallel
tests start it: it joins the group, loads the tiny model, splits its transformer's attention,
renders, and renders again from the first render's checkpoint in a new group; the writing
process keeps the checkpoint, the final latents and the video's frames of each."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from safetensors.torch import save_file

from kernel.job_spec import JobSpec
from tests.support.renders import CPU_RECIPE
from worker_ami.agent.context_parallel import Span, join, leave, span_transformer
from worker_ami.agent.families import load_renderer
from worker_ami.agent.state_codec import decode_state, encode_state

CHECKPOINT_AT = 2  # of the job's steps


def render_rank(
    rank: int, processes: int, ports: tuple[int, int], model_dir: Path, spec: JobSpec, out: Path
) -> None:
    """The whole render in one group (keeping its checkpoint at `CHECKPOINT_AT` in
    out/whole/checkpoint), then in a new group a render resumed from that checkpoint, each
    written to its folder by the first process."""
    _render(Span(processes, rank, f"127.0.0.1:{ports[0]}"), model_dir, spec, out / "whole")
    checkpoint = out / "whole" / "checkpoint"
    _render(
        Span(processes, rank, f"127.0.0.1:{ports[1]}"), model_dir, spec, out / "resumed", checkpoint
    )


def _render(
    span: Span, model_dir: Path, spec: JobSpec, out: Path, resume_from: Path | None = None
) -> None:
    join(span, "cpu")  # every process of the group meets here: the last render is written
    try:
        renderer = load_renderer(model_dir, "cpu", CPU_RECIPE)
        span_transformer(renderer.pipe, span, "cpu")
        resume = None
        if resume_from is not None:
            resume = decode_state({p.name: p.read_bytes() for p in resume_from.iterdir()})
        prompt, state = renderer.begin(spec, resume)
        while state.step < spec.steps:
            state = renderer.step(state, prompt, spec.guidance)
            if span.writes and resume is None and state.step == CHECKPOINT_AT:
                (out / "checkpoint").mkdir(parents=True)
                for name, blob in encode_state(state).items():
                    (out / "checkpoint" / name).write_bytes(blob)
        frames = renderer.decode(state)
        if span.writes:
            out.mkdir(parents=True, exist_ok=True)
            save_file({"latents": state.latents.contiguous()}, str(out / "latents.safetensors"))
            np.save(out / "frames.npy", frames)
    finally:
        leave()
