"""`benchmarks/gpu_step.py --smoke`: on the CPU, the tiny model through the benchmark's whole
path (its GPU figures are measured on a GPU; see README, "Cost per video")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks import gpu_step


def test_the_gpu_benchmark_runs_the_tiny_model_on_the_cpu(tmp_path: Path) -> None:
    out = tmp_path / "gpu-step.json"
    printed: list[dict[str, Any]] = []
    report = gpu_step.main(["--smoke", "--out", str(out)], printer=printed.append)
    assert printed == [report]
    assert json.loads(out.read_text()) == report
    configs = {row["config"] for row in report["rows"]}
    assert configs == {"diffusers", "ff-sequential", "ff-batched-default"}
    checks = report["checks"]
    assert checks["identical to diffusers tiny 32x5"] is True
    assert checks["cold job loaded the model"] is True
    assert checks["second job loaded the model"] is False
    assert checks["resume in a new process bit-equal"] is True
