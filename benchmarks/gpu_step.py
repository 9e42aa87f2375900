"""Seconds per denoising step: FrameFleet's renderer against plain diffusers, on Wan 2.1 1.3B-
and 14B-shaped pipelines built from the real configs with random weights (no download).

    python -m benchmarks.gpu_step            # on a GPU: the table below, JSON in results/
    python -m benchmarks.gpu_step --smoke    # on a CPU: the tiny model, the same code paths

What it measures, per model and video shape (480x832 and 720x1280, 33 and 81 frames):
- `diffusers`: `WanPipeline.__call__` in bf16 (fp32 VAE), its default attention, guidance as two
  forwards: the plain diffusers user's fastest configuration with the same output.
- `ff-sequential`: FrameFleet's `Renderer.step` with the same layout; its latents are checked
  bit-equal to diffusers' after the timed steps.
- `ff-batched-flash`: FrameFleet's GPU default (guidance as one batch of two, flash attention).
- `fp32` (1.3B, 480x832x81): every component in fp32 without TF32, as FrameFleet ran before.
Then, through real render processes (`ChildRenders`): an uninterrupted job, a second job of the
same model on the warm process (seconds from start to its first step), its checkpoint resumed
in a fresh process, and the resumed latents compared bit for bit with the uninterrupted ones.

Both paths use the flow-matching Euler scheduler (shift 3): FrameFleet's renderer supports
single-step schedulers only, and the scheduler's cost per step is negligible either way. The
text encoder has UMT5-XXL's width (4096) but 2 of its 24 layers: it runs once per job, not per
step, and its embeddings have the real shape.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from diffusers import (
    AutoencoderKLWan,
    FlowMatchEulerDiscreteScheduler,
    WanPipeline,
    WanTransformer3DModel,
)
from transformers import UMT5Config, UMT5EncoderModel

from kernel.job_spec import JobSpec, parse_job
from kernel.precision import ComponentDtypes, Dtype
from worker_ami.agent.recipe import AttentionKernel, CfgLayout, RenderRecipe
from worker_ami.agent.render_process import ChildRenders, RenderLimits
from worker_ami.agent.renderer import TORCH_DTYPES, Renderer, configure_torch, load_pipeline
from worker_ami.agent.state_codec import LATENTS, decode_state
from worker_ami.agent.tiny_model import build_tiny_wan, word_tokenizer

RESULTS = Path(__file__).parent / "results" / "gpu-step.json"
WAN = {
    "wan2.1-t2v-1.3b": {"num_attention_heads": 12, "ffn_dim": 8960, "num_layers": 30},
    "wan2.1-t2v-14b": {"num_attention_heads": 40, "ffn_dim": 13824, "num_layers": 40},
}
WAN_COMMON: dict[str, Any] = {
    "patch_size": (1, 2, 2), "attention_head_dim": 128, "in_channels": 16, "out_channels": 16,
    "text_dim": 4096, "freq_dim": 256, "cross_attn_norm": True,
    "qk_norm": "rms_norm_across_heads", "eps": 1e-6, "rope_max_seq_len": 1024,
}  # fmt: skip
BF16 = ComponentDtypes(transformer=Dtype.BF16, text_encoder=Dtype.BF16, vae=Dtype.FP32)
FP32 = ComponentDtypes(transformer=Dtype.FP32, text_encoder=Dtype.FP32, vae=Dtype.FP32)
STEPS = 50  # Wan's default schedule; only a few of its steps are run


def build_wan(name: str, device: str, dtypes: ComponentDtypes) -> WanPipeline:
    """A random-weight pipeline of `name`'s shape, built on `device` in `dtypes`."""
    torch.manual_seed(0)
    with torch.device(device):
        transformer = WanTransformer3DModel(**WAN_COMMON, **WAN[name])
        text_encoder = UMT5EncoderModel(
            UMT5Config(
                vocab_size=64,
                d_model=4096,
                d_kv=64,
                d_ff=10240,
                num_layers=2,
                num_heads=64,
                relative_attention_num_buckets=32,
                relative_attention_max_distance=128,
            )
        )
        vae = AutoencoderKLWan()
    pipe = WanPipeline(
        tokenizer=word_tokenizer(max_length=512),
        text_encoder=text_encoder.to(TORCH_DTYPES[dtypes.text_encoder]).eval(),
        vae=vae.to(TORCH_DTYPES[dtypes.vae]).eval(),
        scheduler=FlowMatchEulerDiscreteScheduler(shift=3.0),
        transformer=transformer.to(TORCH_DTYPES[dtypes.transformer]).eval(),
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


def job(name: str, height: int, width: int, frames: int, steps: int = STEPS) -> JobSpec:
    return parse_job(
        {"schema": "framefleet.job/v1", "job_id": f"bench-{height}-{frames}", "model": "wan/t2v",
         "prompt": "a red fox running through snow", "negative_prompt": "blurry low quality",
         "width": width, "height": height, "num_frames": frames, "steps": steps,
         "guidance": 5.0, "seed": 7, "output": "s3://bench-out/videos/"},
        now=None,
    )  # fmt: skip


def recipe(
    dtypes: ComponentDtypes, family: str, cfg: CfgLayout, attention: AttentionKernel
) -> RenderRecipe:
    return RenderRecipe(dtypes=dtypes, gpu_family=family, cfg=cfg, attention=attention)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_renderer(renderer: Renderer, spec: JobSpec, device: str, warmup: int, timed: int
                  ) -> tuple[list[float], torch.Tensor]:  # fmt: skip
    prompt, state = renderer.begin(spec, None)
    seconds = []
    for _ in range(warmup + timed):
        sync(device)
        started = time.perf_counter()
        state = renderer.step(state, prompt, spec.guidance)
        sync(device)
        seconds.append(time.perf_counter() - started)
    return seconds[warmup:], state.latents


def time_diffusers(pipe: WanPipeline, renderer: Renderer, spec: JobSpec, device: str,
                   warmup: int, timed: int) -> tuple[list[float], torch.Tensor]:  # fmt: skip
    """Plain `WanPipeline.__call__` from the same noise and embeddings, stopped (diffusers'
    interrupt) after the steps it is timed for."""
    prompt, state = renderer.begin(spec, None)
    stamps: list[float] = []

    def on_step(pipeline: WanPipeline, i: int, t: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        sync(device)
        stamps.append(time.perf_counter())
        if len(stamps) > warmup + timed:
            pipeline._interrupt = True
        return kwargs

    sync(device)
    stamps.append(time.perf_counter())
    latents = pipe(
        prompt_embeds=prompt.positive, negative_prompt_embeds=prompt.negative,
        height=spec.height, width=spec.width, num_frames=spec.num_frames,
        num_inference_steps=spec.steps, guidance_scale=spec.guidance,
        latents=state.latents.to(device), output_type="latent", callback_on_step_end=on_step,
    ).frames  # fmt: skip
    seconds = [b - a for a, b in itertools.pairwise(stamps)]
    return seconds[warmup : warmup + timed], latents.detach().float().cpu()


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


class Bench:
    def __init__(self, device: str, family: str, budget_s: float, out: Path) -> None:
        self.device, self.family, self.out = device, family, out
        self.deadline = time.monotonic() + budget_s
        self.rows: list[dict[str, Any]] = []
        self.checks: dict[str, Any] = {}

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def save(self) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(self.report(), indent=2))

    def report(self) -> dict[str, Any]:
        props = torch.cuda.get_device_name(0) if self.device.startswith("cuda") else "cpu"
        return {
            "date": time.strftime("%Y-%m-%d"), "device": props,
            "torch": torch.__version__, "python": platform.python_version(),
            "rows": self.rows, "checks": self.checks,
        }  # fmt: skip

    def shape(self, name: str, pipe: WanPipeline, spec: JobSpec, configs: list[str],
              timed: int) -> None:  # fmt: skip
        """Times each configuration of `configs` on `spec`'s shape, one row each."""
        for config in configs:
            if self.left() < 0:
                print(f"  (time budget spent: {name} {config} not measured)")
                continue
            seconds, latents = self._run(config, pipe, spec, timed)
            row = {"model": name, "width": spec.width, "height": spec.height,
                   "frames": spec.num_frames, "config": config,
                   "seconds_per_step": median(seconds), "samples": seconds}  # fmt: skip
            self.rows.append(row)
            print(f"  {name} {spec.height}x{spec.width}x{spec.num_frames} {config:>18}: "
                  f"{row['seconds_per_step']:.4f} s/step")  # fmt: skip
            if config == "diffusers":
                self._reference = latents
            if config == "ff-sequential":
                equal = bool(torch.equal(latents, self._reference))
                self.checks[f"identical to diffusers {name} {spec.height}x{spec.num_frames}"] = (
                    equal
                )
            self.save()

    def _run(self, config: str, pipe: WanPipeline, spec: JobSpec, timed: int
             ) -> tuple[list[float], torch.Tensor]:  # fmt: skip
        sequential = recipe(BF16, self.family, "sequential", "default")
        if config == "diffusers":
            return time_diffusers(pipe, Renderer(pipe, self.device, sequential), spec,
                                  self.device, 1, timed)  # fmt: skip
        layouts: dict[str, RenderRecipe] = {
            "ff-sequential": sequential,
            "ff-sequential-flash": recipe(BF16, self.family, "sequential", "flash"),
            "ff-batched-flash": recipe(BF16, self.family, "batched", "flash"),
            "ff-batched-cudnn": recipe(BF16, self.family, "batched", "cudnn"),
            "ff-batched-default": recipe(BF16, self.family, "batched", "default"),
        }
        return time_renderer(Renderer(pipe, self.device, layouts[config]), spec, self.device,
                             1, timed)  # fmt: skip


def fp32_today(bench: Bench, spec: JobSpec, timed: int) -> None:
    """The 1.3B model as FrameFleet ran it before: everything fp32, no TF32."""
    if bench.left() < 0:
        return
    pipe = build_wan("wan2.1-t2v-1.3b", bench.device, FP32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        old = recipe(FP32, bench.family, "sequential", "default")
        seconds, _ = time_renderer(Renderer(pipe, bench.device, old), spec, bench.device, 1, timed)
    finally:
        configure_torch(bench.device)
    bench.rows.append({"model": "wan2.1-t2v-1.3b", "width": spec.width, "height": spec.height,
                       "frames": spec.num_frames, "config": "fp32", "seconds_per_step":
                       median(seconds), "samples": seconds})  # fmt: skip
    print(f"  fp32 today: {median(seconds):.4f} s/step")
    del pipe
    bench.save()


def decode_seconds(bench: Bench, pipe: WanPipeline, spec: JobSpec) -> float:
    renderer = Renderer(pipe, bench.device, recipe(BF16, bench.family, "batched", "flash"))
    state = renderer.initial_state(spec)
    sync(bench.device)
    started = time.perf_counter()
    renderer.decode(state)
    sync(bench.device)
    return time.perf_counter() - started


async def child_checks(bench: Bench, model_dir: Path, spec: JobSpec, chosen: RenderRecipe) -> None:
    """Real render processes: cold job, warm second job, resume in a fresh process."""
    bound = 1800.0
    scratch = Path(tempfile.mkdtemp(prefix="gpu-step-"))
    first = ChildRenders(bench.device, RenderLimits(), scratch, spare=False)
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

    fresh = ChildRenders(bench.device, RenderLimits(), scratch, spare=False)
    resumed = await fresh.start("b")
    await resumed.open(model_dir, chosen, spec, decode_state(halfway), bound)
    while await resumed.step(bound) < spec.steps:
        pass
    _, final = await resumed.checkpoint(bound)
    await fresh.close()
    bench.checks |= {
        "cold job: start to first step (s)": round(cold, 3),
        "cold job loaded the model": opened.loaded,
        "second job, same model: start to first step (s)": round(warm, 3),
        "second job loaded the model": warm_opened.loaded,
        "resume in a new process bit-equal": final[LATENTS] == finished[LATENTS],
        "resume recipe": chosen.describe(),
    }
    bench.save()


def run(smoke: bool, out: Path, budget_s: float, only: list[str] | None) -> dict[str, Any]:
    device = "cuda" if torch.cuda.is_available() and not smoke else "cpu"
    configure_torch(device)
    family = "cpu"
    if device == "cuda":
        from kernel.market import family_of_gpu

        family = family_of_gpu(torch.cuda.get_device_name(0))
    bench = Bench(device, family, budget_s, out)
    folder = Path(tempfile.mkdtemp(prefix="gpu-step-model-"))
    if smoke:
        build_tiny_wan(folder)
        dtypes = ComponentDtypes(transformer=Dtype.BF16, text_encoder=Dtype.BF16, vae=Dtype.FP32)
        pipe = load_pipeline(folder, device, dtypes)
        spec = job("tiny", 32, 32, 5, steps=4)
        bench.shape("tiny", pipe, spec, ["diffusers", "ff-sequential", "ff-batched-default"], 2)
        asyncio.run(child_checks(bench, folder, spec, recipe(dtypes, family, "batched", "default")))
        return bench.report()

    seq, fast = ["diffusers", "ff-sequential", "ff-batched-flash"], ["ff-batched-flash"]
    plan: list[tuple[str, list[tuple[int, int, int, int, list[str]]]]] = [
        # (model, [(height, width, frames, timed steps, configurations)]): what matters most
        # first, since the time budget may end the run early.
        ("wan2.1-t2v-1.3b", [(480, 832, 33, 3, [*seq, "ff-batched-cudnn", "ff-sequential-flash"]),
                             (480, 832, 81, 3, [*seq, "ff-batched-cudnn"]),
                             (720, 1280, 33, 3, seq), (720, 1280, 81, 2, seq)]),
        ("wan2.1-t2v-14b", [(480, 832, 33, 2, seq), (480, 832, 81, 2, seq),
                            (720, 1280, 33, 1, fast), (720, 1280, 81, 1, fast)]),
    ]  # fmt: skip
    for name, shapes in plan:
        if only and name not in only:
            continue
        print(f"{name}: building")
        started = time.monotonic()
        if name == "wan2.1-t2v-1.3b":
            # Through the product's own loader: saved, then loaded by `load_pipeline`.
            build_wan(name, device, BF16).save_pretrained(str(folder))
            torch.cuda.empty_cache()
            loaded_at = time.monotonic()
            pipe = load_pipeline(folder, device, BF16)
            bench.checks["1.3b load_pipeline from disk (s)"] = round(
                time.monotonic() - loaded_at, 2
            )
        else:
            pipe = build_wan(name, device, BF16)
        bench.checks[f"{name} build (s)"] = round(time.monotonic() - started, 1)
        for height, width, frames, timed, configs in shapes:
            bench.shape(name, pipe, job(name, height, width, frames), configs, timed)
        if name == "wan2.1-t2v-1.3b":
            bench.checks["1.3b decode 480x832x81 (s)"] = round(
                decode_seconds(bench, pipe, job(name, 480, 832, 81)), 2
            )
            del pipe
            torch.cuda.empty_cache()
            chosen = recipe(BF16, family, "batched", "flash")
            asyncio.run(child_checks(bench, folder, job(name, 480, 832, 33, steps=6), chosen))
            fp32_today(bench, job(name, 480, 832, 81), 2)
        else:
            del pipe
        torch.cuda.empty_cache()
    return bench.report()


def print_table(report: dict[str, Any]) -> None:
    print(f"\n{report['device']}, torch {report['torch']}, {report['date']}")
    print(f"{'model':<18} {'shape':<15} {'config':<20} {'s/step':>8}")
    for row in report["rows"]:
        shape = f"{row['height']}x{row['width']}x{row['frames']}"
        print(f"{row['model']:<18} {shape:<15} {row['config']:<20} "
              f"{row['seconds_per_step']:>8.4f}")  # fmt: skip
    for name, value in report["checks"].items():
        print(f"  {name}: {value}")


def main(argv: list[str] | None = None, printer: Callable[[dict[str, Any]], None] = print_table
         ) -> dict[str, Any]:  # fmt: skip
    parser = argparse.ArgumentParser(prog="benchmarks.gpu_step")
    parser.add_argument("--smoke", action="store_true", help="the tiny model on the CPU")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--budget", type=float, default=480.0, help="seconds; then it stops")
    parser.add_argument("--only", nargs="*", help="model names to run")
    args = parser.parse_args(argv)
    report = run(args.smoke, args.out, args.budget, args.only)
    printer(report)
    return report


if __name__ == "__main__":
    main()
