"""Small workloads and steady traces for the fleet simulator."""

from __future__ import annotations

import json
from pathlib import Path

from simulator.workload import SimJob, daily_poisson
from tests.support.paths import TEST_TRACES

TRACES = TEST_TRACES / "v100-slice"


def small_workload() -> list[SimJob]:
    return [
        SimJob("tight", 0.5, 2.0, 2.6, 9),
        SimJob("loose", 1.0, 3.0, 12.0, 5),
        SimJob("whenever", 2.0, 1.5, None, 1),
        *daily_poisson(12, 1.5, seed=3),
    ]


def steady_trace(folder: Path, zones: dict[str, float], ticks: int = 400) -> Path:
    """p3.2xlarge spot always available in each zone at a constant price."""
    folder.mkdir()
    for zone, price in zones.items():
        body = {"metadata": {"gap_seconds": 600}, "data": [1] * ticks, "prices": [price] * ticks}
        (folder / f"{zone}_p3.2xlarge.json").write_text(json.dumps(body))
    return folder
