"""The cyclic garbage collector, tuned for a long-running service.

Measured in the control plane at 1,000 workers (`benchmarks/control_plane.py`): with
CPython's defaults a full collection came every 4 s and paused the process 75-100 ms, mostly
to re-scan what it built at start (modules, functions, compiled queries), and it landed in
scheduling decisions (their p99 was 100 ms against a p50 of 11 ms).
"""

from __future__ import annotations

import gc

# Allocations between young collections (CPython: 700). Most of a tick's objects (rows,
# records, messages) die within it; with more room they die before they are promoted, and
# the full collections that promoted survivors set off come about five times less often.
YOUNG_THRESHOLD = 50_000


def settle_heap() -> None:
    """Once the process has built what lives as long as it does: collect, move all of it out
    of the collector's scans (`gc.freeze`), and give young objects room to die. Only for a
    process's own entry point (a test runner would keep its garbage cycles for good)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, 20, 10)
