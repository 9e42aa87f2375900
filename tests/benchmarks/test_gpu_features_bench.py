"""benchmarks/gpu_features.py on a small workload: a row per configuration and the bound, and
the sharing table's previews gain from sharing while 480p renders (all compute) do not."""

from __future__ import annotations

from benchmarks.gpu_features import fleet_rows, sharing_rows


def test_fleet_rows_cover_eight_configurations_and_the_bound() -> None:
    rows = fleet_rows(40, 4.0, seed=2)
    assert len(rows) == 9
    bound = rows[-1]
    assert bound["features"] == "lower bound"
    assert all(row["cost"] >= bound["cost"] for row in rows[:-1])


def test_sharing_gains_for_previews_and_not_for_full_renders() -> None:
    speedup = {(r["kind"], r["jobs"]): r["speedup"] for r in sharing_rows()}
    assert speedup[("preview 1.3B", 4)] > speedup[("preview 1.3B", 2)] > 1.0
    assert speedup[("480p 1.3B", 4)] == 1.0
