"""Seconds per denoising step: FrameFleet's renderer against plain diffusers, on Wan 2.1 1.3B-
and 14B-shaped pipelines built from the real configs with random weights (no download).

    python -m benchmarks.gpu_step            # on a GPU: the table below, JSON in results/
    python -m benchmarks.gpu_step --smoke    # on a CPU: every model cut to one narrow layer
    python -m benchmarks.gpu_step --family ltx-video   # another family: gpu_families.py

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
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from diffusers import WanPipeline

from benchmarks.render_checks import child_checks
from benchmarks.wan_shapes import (
    BF16,
    FP32,
    build_wan,
    job,
    recipe,
    sync,
    time_diffusers,
    time_renderer,
)
from kernel.job_spec import JobSpec
from kernel.model_family import ModelFamily
from worker_ami.agent.families import load_renderer
from worker_ami.agent.families.wan import WanRenderer as Renderer
from worker_ami.agent.recipe import RenderRecipe
from worker_ami.agent.renderer import configure_torch

RESULTS = Path(__file__).parent / "results" / "gpu-step.json"
WARMUP = 1  # steps run before the timed ones (reported apart: a compile's cost is there)


def uncompile(pipe: WanPipeline) -> None:
    """Back to eager blocks after a compiled configuration (`compile_repeated_blocks` compiles
    in place, and the next configurations time the same pipeline)."""
    for module in pipe.transformer.modules():
        if getattr(module, "_compiled_call_impl", None) is not None:
            module._compiled_call_impl = None


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
            "date": time.strftime("%Y-%m-%d"),
            "device": props,
            "torch": torch.__version__,
            "python": platform.python_version(),
            "rows": self.rows,
            "checks": self.checks,
        }

    def shape(
        self, name: str, pipe: WanPipeline, spec: JobSpec, configs: list[str], timed: int
    ) -> None:
        """Times each configuration of `configs` on `spec`'s shape, one row each."""
        for config in configs:
            if self.left() < 0:
                print(f"  (time budget spent: {name} {config} not measured)")
                continue
            every, latents = self._run(config, pipe, spec, timed)
            seconds = every[WARMUP:]
            row = {
                "model": name,
                "width": spec.width,
                "height": spec.height,
                "frames": spec.num_frames,
                "config": config,
                "seconds_per_step": median(seconds),
                "samples": seconds,
                # What the first step of a process costs (a compile, where one is made).
                "warmup_seconds": every[:WARMUP],
            }
            self.rows.append(row)
            print(
                f"  {name} {spec.height}x{spec.width}x{spec.num_frames} {config:>18}: "
                f"{row['seconds_per_step']:.4f} s/step"
            )
            if config == "diffusers":
                self._reference = latents
            if config == "ff-sequential":
                equal = bool(torch.equal(latents, self._reference))
                self.checks[f"identical to diffusers {name} {spec.height}x{spec.num_frames}"] = (
                    equal
                )
            self.save()

    def _run(
        self, config: str, pipe: WanPipeline, spec: JobSpec, timed: int
    ) -> tuple[list[float], torch.Tensor]:
        sequential = recipe(BF16, self.family, "sequential", "default")
        if config == "diffusers":
            return time_diffusers(
                pipe, Renderer(pipe, self.device, sequential), spec, self.device, WARMUP, timed
            )
        layouts: dict[str, RenderRecipe] = {
            "ff-sequential": sequential,
            "ff-sequential-flash": recipe(BF16, self.family, "sequential", "flash"),
            "ff-batched-flash": recipe(BF16, self.family, "batched", "flash"),
            "ff-batched-cudnn": recipe(BF16, self.family, "batched", "cudnn"),
            "ff-batched-default": recipe(BF16, self.family, "batched", "default"),
            "ff-batched-flash-compiled": recipe(BF16, self.family, "batched", "flash").model_copy(
                update={"compiled": True}
            ),
        }
        chosen = layouts[config]
        try:
            return time_renderer(
                Renderer(pipe, self.device, chosen), spec, self.device, WARMUP, timed
            )
        finally:
            if chosen.compiled:
                uncompile(pipe)


def fp32_today(bench: Bench, spec: JobSpec, timed: int, dry: bool) -> None:
    """The 1.3B model as FrameFleet ran it before: everything fp32, no TF32."""
    if bench.left() < 0:
        return
    pipe = build_wan("wan2.1-t2v-1.3b", bench.device, FP32, dry)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        old = recipe(FP32, bench.family, "sequential", "default")
        every, _ = time_renderer(Renderer(pipe, bench.device, old), spec, bench.device, 1, timed)
        seconds = every[WARMUP:]
    finally:
        configure_torch(bench.device)
    bench.rows.append(
        {
            "model": "wan2.1-t2v-1.3b",
            "width": spec.width,
            "height": spec.height,
            "frames": spec.num_frames,
            "config": "fp32",
            "seconds_per_step": median(seconds),
            "samples": seconds,
        }
    )
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


def run(out: Path, budget_s: float, only: list[str] | None, dry: bool = False) -> dict[str, Any]:
    """`dry`: the same plan on a CPU, each model cut to one narrow layer and each video to
    32x32x5 (the smoke test of every code path the GPU run takes)."""
    device = "cuda" if torch.cuda.is_available() and not dry else "cpu"
    configure_torch(device)
    family = "cpu"
    if device == "cuda":
        from kernel.market import family_of_gpu

        family = family_of_gpu(torch.cuda.get_device_name(0))
    bench = Bench(device, family, budget_s, out)
    folder = Path(tempfile.mkdtemp(prefix="gpu-step-model-"))
    seq, fast = ["diffusers", "ff-sequential", "ff-batched-flash"], ["ff-batched-flash"]
    plan: list[tuple[str, list[tuple[int, int, int, int, list[str]]]]] = [
        # (model, [(height, width, frames, timed steps, configurations)]): what matters most
        # first, since the time budget may end the run early.
        (
            "wan2.1-t2v-1.3b",
            [
                (480, 832, 33, 3, [*seq, "ff-batched-cudnn", "ff-sequential-flash"]),
                (480, 832, 81, 3, [*seq, "ff-batched-cudnn", "ff-batched-flash-compiled"]),
                (720, 1280, 33, 3, seq),
                (720, 1280, 81, 2, seq),
            ],
        ),
        (
            "wan2.1-t2v-14b",
            [
                (480, 832, 33, 2, seq),
                (480, 832, 81, 2, seq),
                (720, 1280, 33, 1, fast),
                (720, 1280, 81, 1, fast),
            ],
        ),
    ]
    if dry:  # a compile takes half a minute on a CPU: its path is a unit test's
        plan = [
            (name, [(32, 32, 5, 1, [c for c in cs if "compiled" not in c]) for *_, cs in shapes])
            for name, shapes in plan
        ]
    video = (32, 32, 5) if dry else (480, 832, 81)
    short = (32, 32, 5) if dry else (480, 832, 33)
    for name, shapes in plan:
        if only and name not in only:
            continue
        print(f"{name}: building")
        started = time.monotonic()
        if name == "wan2.1-t2v-1.3b":
            # Through the product's own loader: saved, then loaded by `load_renderer`.
            build_wan(name, device, BF16, dry).save_pretrained(str(folder))
            torch.cuda.empty_cache()
            loaded_at = time.monotonic()
            loaded = recipe(BF16, bench.family, "batched", "flash")
            pipe = load_renderer(folder, device, loaded).pipe
            bench.checks["1.3b load_pipeline from disk (s)"] = round(
                time.monotonic() - loaded_at, 2
            )
        else:
            pipe = build_wan(name, device, BF16, dry)
        bench.checks[f"{name} build (s)"] = round(time.monotonic() - started, 1)
        for height, width, frames, timed, configs in shapes:
            bench.shape(name, pipe, job(name, height, width, frames), configs, timed)
        if name == "wan2.1-t2v-1.3b":
            bench.checks["1.3b decode 480x832x81 (s)"] = round(
                decode_seconds(bench, pipe, job(name, *video)), 2
            )
            del pipe
            torch.cuda.empty_cache()
            chosen = recipe(BF16, family, "batched", "flash")
            spec = job(name, *short, steps=6)
            bench.checks |= asyncio.run(child_checks(folder, spec, chosen, device))
            bench.save()
            fp32_today(bench, job(name, *video), 2, dry)
        else:
            del pipe
        torch.cuda.empty_cache()
    return bench.report()


def print_table(report: dict[str, Any]) -> None:
    print(f"\n{report['device']}, torch {report['torch']}, {report['date']}")
    print(f"{'model':<18} {'shape':<15} {'config':<20} {'s/step':>8}")
    for row in report["rows"]:
        shape = f"{row['height']}x{row['width']}x{row['frames']}"
        print(f"{row['model']:<18} {shape:<15} {row['config']:<20} {row['seconds_per_step']:>8.4f}")
    for name, value in report["checks"].items():
        print(f"  {name}: {value}")


def main(
    argv: list[str] | None = None, printer: Callable[[dict[str, Any]], None] = print_table
) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="benchmarks.gpu_step")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="on a CPU: the same plan, each model cut to one narrow layer (checks the code)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--budget", type=float, default=480.0, help="seconds; then it stops")
    parser.add_argument("--only", nargs="*", help="model names to run")
    parser.add_argument(
        "--family",
        choices=[f.value for f in ModelFamily],
        default=ModelFamily.WAN21_T2V.value,
        help="the model family to time: Wan 2.1 text-to-video here, the others in "
        "benchmarks/gpu_families.py (each against its own diffusers pipeline)",
    )
    args = parser.parse_args(argv)
    if args.family != ModelFamily.WAN21_T2V:
        from benchmarks import gpu_families

        out = args.out if args.out != RESULTS else gpu_families.RESULTS
        smoke = ["--smoke"] if args.smoke else []
        return gpu_families.main([*smoke, "--out", str(out), "--family", args.family], printer)
    report = run(args.out, args.budget, args.only, args.smoke)
    printer(report)
    return report


if __name__ == "__main__":
    main()
