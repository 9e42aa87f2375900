"""A render split into stages, each loading only its components, makes the video the unsplit
render makes, bit for bit; what passes between the stages is safetensors, and bad embeddings
are refused, not run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kernel.job_spec import parse_job
from kernel.render_stage import RenderStage
from tests.support.jobs import job_dict
from tests.support.renders import CPU_RECIPE
from worker_ami.agent.errors import CheckpointRejected
from worker_ami.agent.families import load_renderer
from worker_ami.agent.families.wan import WanRenderer
from worker_ami.agent.renderer import Renderer
from worker_ami.agent.stages import (
    decode_embeddings,
    decode_stage,
    denoise_stage,
    encode_stage,
)
from worker_ami.agent.state_codec import EMBEDDINGS, decode_state, encode_state
from worker_ami.agent.video import encode_mp4


def test_a_staged_render_makes_the_unstaged_video(tiny_model_dir: Path) -> None:
    spec = parse_job(job_dict("staged", steps=4), now=None)
    whole = load_renderer(tiny_model_dir, "cpu", CPU_RECIPE)
    prompt, state = whole.begin(spec, None)
    while state.step < spec.steps:
        state = whole.step(state, prompt, spec.guidance)
    unstaged = whole.decode(state)

    def stage_renderer(stage: RenderStage) -> Renderer:
        renderer = load_renderer(tiny_model_dir, "cpu", CPU_RECIPE, stage)
        components = {"transformer", "transformer_2", "text_encoder", "vae"}
        loaded = {name for name in components if getattr(renderer.pipe, name, None)}
        # Wan 2.1 has no second expert: the denoising stage loads the one it has.
        assert loaded == set(WanRenderer.stage_components[stage]) - {"transformer_2"}
        return renderer

    embeddings = encode_stage(stage_renderer(RenderStage.ENCODE), spec)
    final = denoise_stage(stage_renderer(RenderStage.DENOISE), spec, embeddings)
    # Through the checkpoint's own blobs, as the decoding stage reads them from S3.
    staged = decode_stage(stage_renderer(RenderStage.DECODE), decode_state(encode_state(final)))
    assert np.array_equal(staged, unstaged)
    assert encode_mp4(staged, spec.fps) == encode_mp4(unstaged, spec.fps)


def test_embeddings_that_are_not_safetensors_are_refused() -> None:
    with pytest.raises(CheckpointRejected):
        decode_embeddings({EMBEDDINGS: b"\x80\x04not safetensors"})
    with pytest.raises(CheckpointRejected):
        decode_embeddings({})


def test_frames_past_720p_decode_tiled_and_smaller_ones_whole(tiny_model_dir: Path) -> None:
    """Tiling follows the frame size alone, so a render decodes to the same bits whole or as a
    decoding stage on a smaller GPU; a tiled frame stays close to the untiled one."""
    renderer = load_renderer(tiny_model_dir, "cpu", CPU_RECIPE)
    pipe = renderer.pipe
    small = parse_job(job_dict("small", steps=1), now=None)
    renderer.decode(renderer.initial_state(small))
    assert not pipe.vae.use_tiling
    large = parse_job(job_dict("large", width=1280, height=736, num_frames=1, steps=1), now=None)
    state = renderer.initial_state(large)
    tiled = renderer.decode(state)
    assert pipe.vae.use_tiling
    untiled = renderer.decode(state, tiled=False)
    assert tiled.shape == untiled.shape == (1, 736, 1280, 3)
    assert not np.array_equal(tiled, untiled)
    assert np.abs(tiled.astype(np.int16) - untiled.astype(np.int16)).mean() < 8
