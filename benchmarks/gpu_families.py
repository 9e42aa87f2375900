"""Seconds per denoising step of each model family beyond Wan 2.1 text-to-video (which
`gpu_step.py` times): FrameFleet's renderer against plain diffusers, bf16, on pipelines of each
family's real shape with random weights (`family_shapes.py`; no download).

    python -m benchmarks.gpu_families [--family F ...]    # on a GPU
    python -m benchmarks.gpu_families --smoke              # on a CPU: the tiny test pipelines

Per family, at its shape (Wan 480x832x81, LTX-Video 512x768x121):
- `diffusers`: the family's own pipeline `__call__` (WanPipeline, WanImageToVideoPipeline,
  LTXPipeline) from the same seed and prompt, its default attention, its steps timed by its
  step callback and stopped by its interrupt;
- `ff-sequential`: FrameFleet's step with guidance as two forwards; for the Wan families its
  latents are checked bit-equal to diffusers' (LTXPipeline batches its two passes);
- `ff-batched-flash`: FrameFleet's GPU default.
The schedule is short (5 steps), so that Wan 2.2 switches experts within the timed steps.
JSON to `benchmarks/results/gpu-families.json`.
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from benchmarks.family_shapes import SHAPES, build_family, diffusers_call
from benchmarks.wan_shapes import BF16, StepStamps, recipe, time_renderer
from kernel.job_spec import JobSpec, parse_job
from kernel.model_family import ModelFamily, traits_of
from worker_ami.agent.families import renderer_class
from worker_ami.agent.job_inputs import JobInputs
from worker_ami.agent.recipe import AttentionKernel, CfgLayout
from worker_ami.agent.renderer import configure_torch

RESULTS = Path(__file__).parent / "results" / "gpu-families.json"
WARMUP, TIMED = 1, 3
SCHEDULE = WARMUP + TIMED + 1  # steps in the schedule: Wan 2.2 switches within the timed ones
CONFIGS = ("diffusers", "ff-sequential", "ff-batched-flash")
FAMILIES: list[ModelFamily] = [f for f in ModelFamily if f is not ModelFamily.WAN21_T2V]
LAYOUTS: dict[str, tuple[CfgLayout, AttentionKernel]] = {
    "ff-sequential": ("sequential", "default"),
    "ff-batched-flash": ("batched", "flash"),
}


def spec_of(family: ModelFamily, dry: bool) -> JobSpec:
    height, width, frames = (32, 32, 1 + traits_of(family).frames_step) if dry else SHAPES[family]
    return parse_job(
        {
            "schema": "framefleet.job/v1",
            "job_id": "bench-family",
            "model": "bench/family",
            "prompt": "a red fox running through snow",
            "negative_prompt": "blurry low quality",
            "width": width,
            "height": height,
            "num_frames": frames,
            "steps": SCHEDULE,
            "guidance": 5.0,
            "seed": 7,
            "output": "s3://bench-out/videos/",
        },
        now=None,
    )


def first_frame(spec: JobSpec, folder: Path) -> Path:
    side = torch.arange(spec.height * spec.width * 3, dtype=torch.int64) * 7 % 255
    pixels = side.to(torch.uint8).reshape(spec.height, spec.width, 3).numpy()
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    path = folder / "first-frame.png"
    path.write_bytes(out.getvalue())
    return path


def time_diffusers(
    pipe: Any, family: ModelFamily, spec: JobSpec, image: Path, device: str
) -> tuple[list[float], torch.Tensor]:
    stamps = StepStamps(device, WARMUP + TIMED)
    call = diffusers_call(pipe, family, spec, image) | {"callback_on_step_end": stamps}
    stamps.start()
    latents = pipe(**call).frames
    return stamps.seconds(), latents.detach().float().cpu()


def run(out: Path, families: list[ModelFamily], dry: bool) -> dict[str, Any]:
    device = "cuda" if torch.cuda.is_available() and not dry else "cpu"
    configure_torch(device)
    gpu = "cpu"
    if device == "cuda":
        from kernel.market import family_of_gpu

        gpu = family_of_gpu(torch.cuda.get_device_name(0))
    rows: list[dict[str, Any]] = []
    checks: dict[str, Any] = {}
    folder = Path(tempfile.mkdtemp(prefix="gpu-families-"))
    for family in families:
        spec = spec_of(family, dry)
        image = first_frame(spec, folder)
        inputs = JobInputs(image=image)
        started = time.monotonic()
        pipe = build_family(family, device, dry)
        checks[f"{family} build (s)"] = round(time.monotonic() - started, 1)
        made: dict[str, torch.Tensor] = {}
        for config in CONFIGS:
            if config == "diffusers":
                seconds, made[config] = time_diffusers(pipe, family, spec, image, device)
            else:
                cfg, attention = (
                    ("batched", "flash") if "batched" in config else ("sequential", "default")
                )
                chosen = recipe(BF16, gpu, cfg, attention).model_copy(  # type: ignore[arg-type]
                    update={"model_family": family}
                )
                renderer = renderer_class(family)(pipe, device, chosen)
                seconds, made[config] = time_renderer(renderer, spec, device, WARMUP, TIMED, inputs)
            step = statistics.median(seconds[WARMUP:])
            rows.append(
                {
                    "family": family.value,
                    "shape": f"{spec.height}x{spec.width}x{spec.num_frames}",
                    "config": config,
                    "seconds_per_step": step,
                    "samples": seconds[WARMUP:],
                }
            )
            print(f"  {family} {config:>18}: {step:.4f} s/step")
        same = torch.equal(made["diffusers"], made["ff-sequential"])
        checks[f"{family} ff-sequential identical to diffusers"] = same
        del pipe
        if device == "cuda":
            torch.cuda.empty_cache()
    report = {
        "date": time.strftime("%Y-%m-%d"),
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "rows": rows,
        "checks": checks,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    return report


def print_table(report: dict[str, Any]) -> None:
    print(f"\n{report['device']}, torch {report['torch']}, {report['date']}")
    print(f"{'family':<12} {'shape':<14} {'config':<18} {'s/step':>8}")
    for row in report["rows"]:
        print(
            f"{row['family']:<12} {row['shape']:<14} {row['config']:<18} "
            f"{row['seconds_per_step']:>8.4f}"
        )
    for name, value in report["checks"].items():
        print(f"  {name}: {value}")


def main(
    argv: list[str] | None = None, printer: Callable[[dict[str, Any]], None] = print_table
) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="benchmarks.gpu_families")
    parser.add_argument("--smoke", action="store_true", help="on a CPU: the tiny pipelines")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--family", nargs="*", choices=[f.value for f in FAMILIES], help="families to time"
    )
    args = parser.parse_args(argv)
    chosen = [ModelFamily(f) for f in args.family] if args.family else FAMILIES
    report = run(args.out, chosen, args.smoke)
    printer(report)
    return report


if __name__ == "__main__":
    main()
