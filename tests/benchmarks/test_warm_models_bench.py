"""benchmarks/warm_models.py on a small mix: the scheduler's cache-aware placement leaves
fewer model loads than warm processes alone, and those fewer than a load per job."""

from __future__ import annotations

from benchmarks.warm_models import run, workload


def test_cache_aware_placement_saves_loads_on_a_mix_of_models() -> None:
    jobs = workload(120, 12.0, seed=3)
    reload = run(jobs, 8, reuse=False, aware=False)
    blind = run(jobs, 8, reuse=True, aware=False)
    aware = run(jobs, 8, reuse=True, aware=True)
    assert reload["loads"] == len(jobs)
    assert aware["loads"] < blind["loads"] < reload["loads"]
    assert aware["load_gpu_hours"] < blind["load_gpu_hours"]
