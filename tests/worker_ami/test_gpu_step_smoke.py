"""`benchmarks/gpu_step.py --smoke`: on the CPU, every code path of the GPU run (the product's
loader, diffusers' pipeline, FrameFleet's step in each layout, the fp32 path, real render
processes: warm second job, resume in a fresh process) with each model cut to one narrow layer.
Its GPU figures are measured on a GPU (README, "Cost per video")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks import gpu_step


def test_the_gpu_benchmark_runs_every_path_on_the_cpu(tmp_path: Path) -> None:
    out = tmp_path / "gpu-step.json"
    printed: list[dict[str, Any]] = []
    argv = ["--smoke", "--out", str(out), "--only", "wan2.1-t2v-1.3b"]
    report = gpu_step.main(argv, printer=printed.append)
    assert printed == [report]
    assert json.loads(out.read_text()) == report
    configs = {row["config"] for row in report["rows"]}
    assert {"diffusers", "ff-sequential", "ff-batched-flash", "fp32"} <= configs
    checks = report["checks"]
    assert checks["identical to diffusers wan2.1-t2v-1.3b 32x5"] is True
    assert checks["cold job loaded the model"] is True
    assert checks["second job loaded the model"] is False
    assert checks["resume in a new process bit-equal"] is True
