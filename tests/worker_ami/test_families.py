"""Every model family steps as its diffusers pipeline does and resumes bit for bit (issue 50):
Wan 2.2's two experts (a resume on each side of the switch, the active expert in the state and
checked), Wan 2.1 and 2.2 image-to-video (the image's condition made at the encoding stage),
LTX-Video (its length-shifted schedule, packed latents). Tiny random-weight pipelines built
from diffusers' own classes; the whole-job paths (stages, render processes, S3) are in
test_family_runs.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from diffusers import LTXPipeline

from benchmarks.family_shapes import diffusers_call
from kernel.job_spec import JobSpec, parse_job
from kernel.model_family import ModelFamily, traits_of
from kernel.precision import Precision
from kernel.render_stage import RenderStage
from tests.support.jobs import job_dict
from tests.support.tiny_inputs import png_bytes
from worker_ami.agent.errors import JobFault
from worker_ami.agent.families import load_renderer, renderer_class
from worker_ami.agent.job_inputs import JobInputs
from worker_ami.agent.recipe import RenderRecipe, recipe_for
from worker_ami.agent.renderer import Conditioning, Renderer
from worker_ami.agent.stages import decode_embeddings, encode_embeddings
from worker_ami.agent.state_codec import decode_state, encode_state
from worker_ami.agent.tiny_families import build_tiny

NEW_FAMILIES = [f for f in ModelFamily if f is not ModelFamily.WAN21_T2V]
STEPS = 6


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("inputs") / "first-frame.png"
    path.write_bytes(png_bytes())
    return path


@pytest.fixture(scope="module", params=NEW_FAMILIES, ids=str)
def family_model(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[ModelFamily, Path]:
    family: ModelFamily = request.param
    return family, build_tiny(family, tmp_path_factory.mktemp("families") / family.value)


def recipe(family: ModelFamily) -> RenderRecipe:
    return recipe_for(Precision(), "cpu", "cpu", model_family=family)


def spec_for(family: ModelFamily) -> JobSpec:
    frames = 1 + 2 * traits_of(family).frames_step
    return parse_job(
        job_dict(
            f"{family.value.replace('.', '')}-job",
            width=32,
            height=32,
            num_frames=frames,
            steps=STEPS,
        ),
        now=None,
    )


def render(renderer: Renderer, spec: JobSpec, inputs: JobInputs) -> list:  # type: ignore[type-arg]
    cond, state = renderer.begin(spec, None, inputs)
    states = [state]
    while not states[-1].done:
        states.append(renderer.step(states[-1], cond, spec.guidance))
    return states


def test_each_family_resumes_bit_for_bit_from_every_step(
    family_model: tuple[ModelFamily, Path], image: Path
) -> None:
    family, folder = family_model
    spec, inputs = spec_for(family), JobInputs(image=image)
    states = render(load_renderer(folder, "cpu", recipe(family)), spec, inputs)
    final = states[-1]
    frames = load_renderer(folder, "cpu", recipe(family)).decode(final)
    experts = [s.expert for s in states]
    if traits_of(family).experts == 2:
        # The high-noise expert first, then the low-noise one: resumes on both sides below.
        assert experts[0] == 0
        assert experts[-1] == 1
    else:
        assert set(experts) == {0}
    for saved in states[:-1]:
        # Through the checkpoint's bytes into a freshly loaded pipeline, as on another worker.
        fresh = load_renderer(folder, "cpu", recipe(family))
        state = decode_state(encode_state(saved))
        fresh.prepare_resume(state)
        cond = fresh.encode(spec, inputs)
        while not state.done:
            state = fresh.step(state, cond, spec.guidance)
        assert torch.equal(state.latents, final.latents), f"resume at {saved.step} diverged"
        assert np.array_equal(fresh.decode(state), frames)


def test_each_family_steps_as_its_diffusers_pipeline(
    family_model: tuple[ModelFamily, Path], image: Path
) -> None:
    family, folder = family_model
    spec = spec_for(family)
    final = render(load_renderer(folder, "cpu", recipe(family)), spec, JobInputs(image=image))[-1]
    pipe = renderer_class(family).pipeline_class.from_pretrained(str(folder))
    pipe.set_progress_bar_config(disable=True)
    latents = pipe(**diffusers_call(pipe, family, spec, image)).frames
    if family is ModelFamily.LTX_VIDEO:
        # LTXPipeline batches its two guidance passes (unconditional first); a CPU worker's
        # recipe runs them one after the other: the same arithmetic to the last bits or so.
        latents = LTXPipeline._unpack_latents(latents, *final.latents.shape[-3:], 1, 1)
        assert torch.allclose(latents, final.latents, atol=1e-5)
    else:
        assert torch.equal(latents, final.latents)


def test_stages_of_each_family_carry_what_the_next_one_reads(
    family_model: tuple[ModelFamily, Path], image: Path
) -> None:
    family, folder = family_model
    spec, inputs = spec_for(family), JobInputs(image=image)
    whole = load_renderer(folder, "cpu", recipe(family))
    final = render(whole, spec, inputs)[-1]
    encoder = load_renderer(folder, "cpu", recipe(family), RenderStage.ENCODE)
    stored = decode_embeddings(encode_embeddings(encoder.encode(spec, inputs)))
    denoiser = load_renderer(folder, "cpu", recipe(family), RenderStage.DENOISE)
    assert getattr(denoiser.pipe, "text_encoder", None) is None
    state = denoiser.start(spec, None)
    denoiser.smoke(spec, state, stored)  # the preflight's tiny step, on stored conditioning
    while not state.done:
        state = denoiser.step(state, stored, spec.guidance)
    assert torch.equal(state.latents, final.latents)
    decoder = load_renderer(folder, "cpu", recipe(family), RenderStage.DECODE)
    assert np.array_equal(decoder.decode(state), whole.decode(final))


def test_a_checkpoint_from_another_switch_step_is_refused(tmp_path: Path) -> None:
    folder = build_tiny(ModelFamily.WAN22_T2V, tmp_path / "wan22")
    renderer = load_renderer(folder, "cpu", recipe(ModelFamily.WAN22_T2V))
    spec = spec_for(ModelFamily.WAN22_T2V)
    states = render(renderer, spec, JobInputs())
    switched = next(s for s in states if s.expert == 1)
    with pytest.raises(JobFault, match="another switch step"):
        renderer.prepare_resume(replace(switched, expert=0))


def test_an_image_job_without_its_image_or_with_a_broken_one_is_the_jobs_fault(
    tmp_path: Path,
) -> None:
    folder = build_tiny(ModelFamily.WAN22_I2V, tmp_path / "i2v")
    renderer = load_renderer(folder, "cpu", recipe(ModelFamily.WAN22_I2V))
    spec = spec_for(ModelFamily.WAN22_I2V)
    with pytest.raises(JobFault, match="without its input image"):
        renderer.encode(spec, JobInputs())
    broken = tmp_path / "broken.png"
    broken.write_bytes(png_bytes()[:40])
    with pytest.raises(JobFault, match="input image unreadable"):
        renderer.encode(spec, JobInputs(image=broken))


def test_a_checkpoint_of_another_family_is_refused() -> None:
    made = recipe(ModelFamily.WAN21_T2V)
    here = recipe(ModelFamily.WAN22_T2V)
    refusal = here.resume_refusal(made, exact=False)
    assert refusal is not None
    assert "wan2.1-t2v" in refusal


def test_stored_conditioning_keeps_each_familys_extras() -> None:
    cond = Conditioning(
        torch.ones(1, 3, 4),
        None,
        {"condition": torch.zeros(1, 20, 3, 4, 4), "positive_mask": torch.ones(1, 3)},
    )
    back = decode_embeddings(encode_embeddings(cond))
    assert set(back.extras) == {"condition", "positive_mask"}
    assert torch.equal(back.extras["condition"], cond.extras["condition"])
    assert back.negative is None
