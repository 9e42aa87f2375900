"""`benchmarks/gpu_families.py --smoke`: on the CPU, every code path of the GPU run of the model
families (each family's own diffusers pipeline against FrameFleet's step in each layout, the
bit-equality check), on the tiny pipelines; and the real-shaped pipelines it builds on a GPU,
built here on the meta device (no memory), so that their configs are known to construct."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from benchmarks import gpu_families, gpu_step
from benchmarks.family_shapes import _real
from kernel.model_family import ModelFamily


def test_the_families_benchmark_runs_every_path_on_the_cpu(tmp_path: Path) -> None:
    out = tmp_path / "gpu-families.json"
    printed: list[dict[str, Any]] = []
    report = gpu_families.main(["--smoke", "--out", str(out)], printer=printed.append)
    assert printed == [report]
    assert json.loads(out.read_text()) == report
    timed = {(row["family"], row["config"]) for row in report["rows"]}
    assert len(timed) == len(gpu_families.FAMILIES) * len(gpu_families.CONFIGS)
    for family in ("wan2.1-i2v", "wan2.2-t2v", "wan2.2-i2v"):
        assert report["checks"][f"{family} ff-sequential identical to diffusers"] is True


def test_the_step_benchmark_takes_the_family(tmp_path: Path) -> None:
    out = tmp_path / "ltx.json"
    argv = ["--smoke", "--family", "ltx-video", "--out", str(out)]
    report = gpu_step.main(argv, printer=lambda _: None)
    assert {row["family"] for row in report["rows"]} == {"ltx-video"}
    assert json.loads(out.read_text()) == report


def test_the_real_shapes_construct() -> None:
    sizes = {}
    for family in gpu_families.FAMILIES:
        with torch.device("meta"):
            pipe = _real(family)
        sizes[family] = sum(p.numel() for p in pipe.transformer.parameters()) / 1e9
        assert (getattr(pipe, "transformer_2", None) is not None) == ("2.2" in family.value)
    assert 14 < sizes[ModelFamily.WAN22_T2V] < 15  # each expert a 14B
    assert 1.5 < sizes[ModelFamily.LTX_VIDEO] < 2.5
