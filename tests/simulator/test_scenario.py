"""Issue 46, item 8: every feature at once, at default settings, run by the product's own loops
(`simulator/scenario.py`): 1.3B and 14B renders at 480p and 720p, deadlines, `exact` jobs, a
spanned render, split renders, two teams with GPU quotas, workers that share their GPUs or
slice them by MIG, a quota error and a zone's spot capacity lost midway. Every job finishes or
waits with a stated reason, none fails through a machine's fault, and no instance stands idle
and billed for a job it cannot run for more than five minutes."""

from __future__ import annotations

from pathlib import Path

from simulator.scenario import Scenario


async def test_everything_at_once_at_default_settings(tmp_path: Path) -> None:
    scenario = Scenario(tmp_path / "scenario.db")
    try:
        outcome = await scenario.run()
    finally:
        scenario.store.dispose()
    print(outcome)  # the summary the closing note quotes (pytest -s)
    assert outcome.failed == []
    assert outcome.machine_faults == 0
    assert all(reason for reason in outcome.waiting.values())
    assert len(outcome.done) + len(outcome.waiting) == 11
    assert max(outcome.idle_claimed_seconds.values(), default=0.0) <= 5 * 60
    # What the run went through, so that it cannot pass by skipping it.
    assert outcome.notices >= 1
    assert outcome.limit_errors >= 1
    assert outcome.split
    assert outcome.lapsed  # a shared or sliced worker could not run what its type was bought for
    assert outcome.quota_waits
    assert {"s480-b", "s720-b", "l720-span"} <= set(outcome.done)  # `exact`, and the span
