"""How long a job may go without a step before it counts as stalled: one formula, shared by
the worker agent's watchdog, the control plane's and the simulator, so that all three agree.

The bound is the expected time of one step (the throughput model's estimate for the job's
model, shape and GPU family, or what this attempt has measured, whichever is longer) times a
factor, and never less than a floor: a step that takes five times its usual time is not a slow
step but a hung kernel, a deadlocked decode or a sick GPU. The first step of an attempt also
pays for warm-up (kernel compilation, cuDNN autotuning), so it gets the start-up allowance on
top.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StallRule:
    factor: float = 5.0
    floor_seconds: float = 60.0
    # Added to the first step's bound (warm-up), and to the control plane's (it hears of a
    # step one heartbeat late, and acts only after the worker's own watchdog had its chance).
    startup_seconds: float = 60.0

    def bound(self, expected_step_seconds: float | None, first_step: bool = False) -> float:
        expected = (
            expected_step_seconds if expected_step_seconds and expected_step_seconds > 0 else 0.0
        )
        bound = max(self.floor_seconds, self.factor * expected)
        return bound + (self.startup_seconds if first_step else 0.0)


def expected_step(planned: float | None, measured: float | None) -> float | None:
    """The longer of the planned and the measured step time (either may be unknown): a job
    on a slower family than planned is not stalled for being on it."""
    known = [s for s in (planned, measured) if s is not None and s > 0]
    return max(known) if known else None
