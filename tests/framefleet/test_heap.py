"""The service processes' collector settings (in a process of their own: the test runner's
collector is left alone)."""

from __future__ import annotations

import json
import subprocess
import sys


def test_a_settled_heap_is_frozen_and_collects_young_objects_less_often() -> None:
    probe = (
        "import gc, json; from framefleet.heap import settle_heap, YOUNG_THRESHOLD; "
        "before = gc.get_freeze_count(); settle_heap(); "
        "print(json.dumps([before, gc.get_freeze_count(), gc.get_threshold()[0], YOUNG_THRESHOLD]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    before, frozen, young, expected = json.loads(out.stdout)
    assert before == 0
    assert frozen > 1000  # the modules, functions and types built at start
    assert young == expected > 700  # CPython's default
