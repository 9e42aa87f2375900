"""Small jobs sharing one GPU: the denoising throughput of 1, 2 and 4 jobs rendering at once on
one GPU, each in a process of its own with its own CUDA memory fraction (as the worker runs
each job), against one job at a time.

    python -m benchmarks.gpu_sharing            # on a GPU: the table below, JSON in results/
    python -m benchmarks.gpu_sharing --smoke    # on a CPU: the model cut to one narrow layer

Four processes each build the Wan 2.1 1.3B-shaped pipeline (random weights, no download) once
and begin one job per video shape. For each shape and each N, the first N processes start
together (a barrier) and each runs the same number of steps with FrameFleet's GPU recipe
(guidance as one batch of two, flash attention); the others wait. Reported per (shape, N):
- steps per second of the whole GPU (N x steps over the time from the start to the last
  process's end), and its gain over N = 1: what sharing buys;
- each job's seconds per step while sharing against alone: how much a neighbour slows a job,
  which is what the scheduler must know before it lets a job join a busy GPU.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import queue
import statistics
import time
from collections.abc import Sequence
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from kernel.step_time import tokens

RESULTS = Path(__file__).parent / "results" / "gpu-sharing.json"
PROCESSES = 4
SHARES = (1, 2, 4)
# (name, height, width, frames, steps timed): small jobs first, then one that fills the GPU.
SHAPES = (
    ("256x448x17", 256, 448, 17, 40),
    ("480x832x33", 480, 832, 33, 8),
    ("480x832x81", 480, 832, 81, 3),
)
SMOKE_SHAPES = (("32x32x5", 32, 32, 5, 2),)
MEMORY_FRACTION = 0.23  # of the GPU per process: four of them fit with room to spare


def _phases(shapes: Sequence[tuple[str, int, int, int, int]]) -> list[tuple[int, int]]:
    """(shape index, N) in the order run."""
    return [(s, n) for s in range(len(shapes)) for n in SHARES]


def _worker(
    rank: int,
    dry: bool,
    shapes: Sequence[tuple[str, int, int, int, int]],
    starts: Sequence[Barrier],
    ends: Sequence[Barrier],
    results: Any,
) -> None:
    import torch

    from benchmarks.wan_shapes import BF16, build_wan, job, recipe, sync
    from worker_ami.agent.families.wan import WanRenderer
    from worker_ami.agent.renderer import configure_torch

    device = "cuda" if torch.cuda.is_available() and not dry else "cpu"
    configure_torch(device)
    if device == "cuda":
        torch.cuda.set_per_process_memory_fraction(MEMORY_FRACTION, torch.device(device))
    pipe = build_wan("wan2.1-t2v-1.3b", device, BF16, dry=dry)
    on_gpu = recipe(BF16, "bench", "batched", "flash")
    renderer = WanRenderer(
        pipe, device, on_gpu if device == "cuda" else recipe(BF16, "bench", "sequential", "default")
    )
    begun = []
    for _name, height, width, frames, _steps in shapes:
        spec = job("wan2.1-t2v-1.3b", height, width, frames)
        prompt, state = renderer.begin(spec, None)
        state = renderer.step(state, prompt, spec.guidance)  # warm: kernels chosen, caches full
        sync(device)
        begun.append((spec, prompt, state))
    results.put(("ready", rank, device))
    for phase, (shape, share) in enumerate(_phases(shapes)):
        if rank >= share:
            continue
        spec, prompt, state = begun[shape]
        starts[phase].wait()
        seconds = []
        for _ in range(shapes[shape][4]):
            started = time.perf_counter()
            state = renderer.step(state, prompt, spec.guidance)
            sync(device)
            seconds.append(time.perf_counter() - started)
        ends[phase].wait()
        results.put(("steps", rank, phase, seconds))


def run(out: Path, dry: bool) -> dict[str, Any]:
    shapes = SMOKE_SHAPES if dry else SHAPES
    context = multiprocessing.get_context("spawn")
    phases = _phases(shapes)
    starts = [context.Barrier(share + 1) for _shape, share in phases]
    ends = [context.Barrier(share + 1) for _shape, share in phases]
    results = context.Queue()
    processes = [
        context.Process(target=_worker, args=(rank, dry, shapes, starts, ends, results))
        for rank in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    devices = {_ready(results, processes) for _ in processes}
    walls = []
    for phase in range(len(phases)):
        starts[phase].wait()
        started = time.perf_counter()
        ends[phase].wait()
        walls.append(time.perf_counter() - started)
    per_phase: dict[int, list[list[float]]] = {}
    for _ in range(sum(share for _shape, share in phases)):
        _kind, _rank, phase, seconds = results.get(timeout=60)
        per_phase.setdefault(phase, []).append(seconds)
    for process in processes:
        process.join(timeout=60)
    rows = []
    alone: dict[int, tuple[float, float]] = {}
    for phase, (shape, share) in enumerate(phases):
        name, height, width, frames, steps = shapes[shape]
        throughput = share * steps / walls[phase]
        per_step = statistics.median(s for job in per_phase[phase] for s in job)
        if share == 1:
            alone[shape] = (throughput, per_step)
        base_throughput, base_step = alone[shape]
        rows.append(
            {
                "shape": name,
                "tokens": tokens(width, height, frames),  # SharingSample's fields, for pace_from
                "jobs_sharing": share,
                "steps_per_second": round(throughput, 3),
                "gain_over_one_at_a_time": round(throughput / base_throughput, 3),
                "seconds_per_step_each": round(per_step, 4),
                "seconds_per_step_alone": round(base_step, 4),
                "slowdown_of_each_job": round(per_step / base_step, 3),
            }
        )
    report = {
        "device": sorted(devices),
        "gpu": _gpu_name(),
        "python": platform.python_version(),
        "memory_fraction_per_process": MEMORY_FRACTION,
        "rows": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    return report


def _ready(results: Any, processes: Sequence[Any]) -> str:
    """The next process's device once it is ready; a process that died stops the run."""
    while True:
        try:
            return str(results.get(timeout=5)[2])
        except queue.Empty:
            dead = [p.exitcode for p in processes if p.exitcode not in (None, 0)]
            if dead:
                for process in processes:
                    process.kill()
                raise SystemExit(f"a render process failed (exit codes {dead})") from None


def _gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"


def print_table(report: dict[str, Any]) -> None:
    print(f"GPU: {report['gpu']}")
    print("shape        jobs  steps/s  gain   s/step each  slowdown")
    for r in report["rows"]:
        print(
            f"{r['shape']:<12} {r['jobs_sharing']:>4}  {r['steps_per_second']:>7.3f}"
            f"  {r['gain_over_one_at_a_time']:>4.2f}x  {r['seconds_per_step_each']:>11.4f}"
            f"  {r['slowdown_of_each_job']:>7.2f}x"
        )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="benchmarks.gpu_sharing")
    parser.add_argument("--smoke", action="store_true", help="on a CPU: a one-layer model")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    report = run(args.out, args.smoke)
    print_table(report)
    return report


if __name__ == "__main__":
    main()
