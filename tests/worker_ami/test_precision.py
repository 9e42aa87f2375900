"""Precision per model: the registry's dtypes reach the transformer, text encoder and VAE; a
checkpoint records the recipe it was computed with, and a resume into another dtype is refused,
one across GPU families only for a job that did not ask for `exact`; a render process that
ended a job cleanly serves the next job of the same model without loading it again."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest
import torch

from kernel.job_spec import parse_job
from kernel.precision import ComponentDtypes, Dtype, Precision, resolve_dtypes
from tests.support.jobs import job_dict
from tests.support.renders import MODEL, Buckets, make_runner, video_job
from worker_ami.agent.checkpoint import CheckpointIdentity, CheckpointStore, ResumeRule
from worker_ami.agent.families import load_renderer
from worker_ami.agent.model_cache import ModelRegistry
from worker_ami.agent.object_store import S3ObjectStore
from worker_ami.agent.recipe import RenderRecipe, recipe_for
from worker_ami.agent.render_limits import RenderLimits
from worker_ami.agent.render_process import ChildRenders
from worker_ami.agent.report import RunStatus
from worker_ami.agent.settings import WorkerSettings

BF16_CPU = Precision(on_cpu=Dtype.BF16)
NOW = datetime(2026, 12, 4, tzinfo=UTC)


def test_the_registry_precision_resolves_per_device_and_family() -> None:
    wan = Precision()  # bf16, the VAE in fp32
    assert resolve_dtypes(wan, "cuda:0", "h100") == ComponentDtypes(
        transformer=Dtype.BF16, text_encoder=Dtype.BF16, vae=Dtype.FP32
    )
    # No bf16 on a T4 or V100: fp16 there, the VAE still fp32.
    assert resolve_dtypes(wan, "cuda:0", "t4").compute is Dtype.FP16
    assert resolve_dtypes(wan, "cuda:0", "v100").vae is Dtype.FP32
    assert resolve_dtypes(wan, "cpu", "cpu").compute is Dtype.FP32
    everything = Precision(compute=Dtype.FP16, fp32_components=())
    assert resolve_dtypes(everything, "cuda:1", "a10g").vae is Dtype.FP16


def test_each_dtype_reaches_its_component(tiny_model_dir: Path) -> None:
    recipe = recipe_for(BF16_CPU, "cpu", "cpu")
    renderer = load_renderer(tiny_model_dir, "cpu", recipe)
    pipe = renderer.pipe
    assert pipe.transformer.dtype == torch.bfloat16
    assert pipe.text_encoder.dtype == torch.bfloat16
    assert pipe.vae.dtype == torch.float32
    spec = parse_job(job_dict("bf16", model=MODEL, steps=2), now=None)
    prompt, state = renderer.begin(spec, None)
    assert prompt.positive.dtype == torch.bfloat16
    stepped = renderer.step(state, prompt, spec.guidance)
    # As in diffusers, the scheduler hands back the transformer's dtype (bf16).
    assert stepped.latents.dtype == torch.bfloat16


def test_a_compiled_recipe_compiles_the_transformer_blocks(tiny_model_dir: Path) -> None:
    """Regional compilation: each repeated block wrapped (lazily: the first step compiles)."""
    recipe = recipe_for(Precision(), "cpu", "cpu", compiled=True)
    pipe = load_renderer(tiny_model_dir, "cpu", recipe).pipe
    blocks = list(pipe.transformer.blocks)
    assert blocks
    assert all(getattr(b, "_compiled_call_impl", None) is not None for b in blocks)
    assert "compiled" in recipe.describe()
    eager = recipe_for(Precision(), "cpu", "cpu")
    assert eager.resume_refusal(recipe, exact=True) is not None  # bits may differ: exact refuses


def _recipe(dtype: Dtype, family: str) -> RenderRecipe:
    dtypes = ComponentDtypes(transformer=dtype, text_encoder=dtype, vae=Dtype.FP32)
    return RenderRecipe(dtypes=dtypes, gpu_family=family, cfg="batched", attention="flash")


async def test_a_checkpoint_of_another_dtype_or_family_is_refused_or_allowed_as_exact_says(
    runner_checkpoint: tuple[CheckpointStore, CheckpointIdentity, str],
) -> None:
    store, identity, key = runner_checkpoint  # written on an H100 in bf16
    h100, l4 = _recipe(Dtype.BF16, "h100"), _recipe(Dtype.BF16, "l4")

    same = await store.resume_point(identity, key, ResumeRule(h100, exact=True))
    assert same.manifest_key == key
    assert same.notes == ()

    fp16 = await store.resume_point(identity, key, ResumeRule(_recipe(Dtype.FP16, "t4")))
    assert fp16.state is None  # never mixed: the job restarts from step 0, and says why
    assert any("computed in bf16" in note and "fp16" in note for note in fp16.notes)

    exact = await store.resume_point(identity, key, ResumeRule(l4, exact=True))
    assert exact.state is None
    assert any("exact job" in note for note in exact.notes)

    relaxed = await store.resume_point(identity, key, ResumeRule(l4, exact=False))
    assert relaxed.manifest_key == key
    assert any("may differ" in note for note in relaxed.notes)


@pytest.fixture
async def runner_checkpoint(
    object_store: S3ObjectStore, buckets: Buckets, tiny_model_dir: Path
) -> tuple[CheckpointStore, CheckpointIdentity, str]:
    recipe = recipe_for(BF16_CPU, "cpu", "cpu")
    spec = parse_job(job_dict("crossing", model=MODEL, steps=3), now=None)
    renderer = load_renderer(tiny_model_dir, "cpu", recipe)
    prompt, state = renderer.begin(spec, None)
    state = renderer.step(state, prompt, spec.guidance)
    store = CheckpointStore(object_store, buckets.checkpoints)
    identity = CheckpointIdentity(
        job_id=spec.job_id,
        job_spec_sha256=spec.fingerprint(),
        model=MODEL,
        model_revision="r1",
        pipeline_config_sha256="0" * 64,
        total_steps=spec.steps,
    )
    key = await store.write(state, identity, 1, NOW, _recipe(Dtype.BF16, "h100"))
    return store, identity, key


async def test_the_runner_renders_in_the_registry_dtype_and_records_it(
    object_store: S3ObjectStore,
    published_model: ModelRegistry,
    worker_settings: WorkerSettings,
    buckets: Buckets,
) -> None:
    entry = published_model.resolve(MODEL).model_copy(update={"precision": BF16_CPU})
    registry = ModelRegistry(models={MODEL: entry})
    runner = make_runner(object_store, registry, worker_settings)
    report = await runner.run(video_job(buckets, "in-bf16", steps=2), attempt=1)
    assert report.status is RunStatus.SUCCEEDED, report.error
    assert report.recipe is not None
    assert report.recipe.dtypes.compute is Dtype.BF16


async def test_a_warm_render_process_serves_the_next_job_without_a_load(
    tiny_model_dir: Path, buckets: Buckets, tmp_path: Path
) -> None:
    renders = ChildRenders("cpu", RenderLimits(threads=1), tmp_path / "scratch", spare=False)
    recipe = recipe_for(Precision(), "cpu", "cpu")
    first = await renders.start("one")
    opened = await first.open(tiny_model_dir, recipe, video_job(buckets, "one"), None, 300)
    assert opened.loaded
    await first.step(300)
    await renders.give_back(first, MODEL)
    assert renders.warm_model == MODEL

    second = await renders.start("two")
    assert second is first  # the same process, its pipeline still loaded
    reopened = await second.open(tiny_model_dir, recipe, video_job(buckets, "two"), None, 300)
    assert not reopened.loaded
    assert reopened.step == 0  # nothing of the first job's state
    # A process stopped midway (a cancel during its step) is never given to another job.
    stepping = asyncio.create_task(second.step(300))
    await asyncio.sleep(0)  # one turn of the loop: the request is written, its reply awaited
    stepping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stepping
    await renders.give_back(second, MODEL)
    assert renders.warm_model is None
    await renders.close()
