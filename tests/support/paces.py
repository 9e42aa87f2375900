"""A fixed pace for the policy tests: seconds per step linear in megapixel-frames, per family
(the priors before the step-time model). The policies' tests are about buying, not about how
long a step takes, so they keep the figures their cases were written for."""

from __future__ import annotations

from autoscaler.throughput import ThroughputModel, WorkShape

SECONDS_PER_MEGAPIXEL_FRAME = {
    "t4": 0.30,
    "v100": 0.16,
    "a10g": 0.12,
    "l4": 0.14,
    "l40s": 0.06,
    "a100": 0.05,
    "h100": 0.025,
    "h200": 0.022,
}


def linear_pace() -> ThroughputModel:
    def prior(shape: WorkShape, family: str) -> float:
        return SECONDS_PER_MEGAPIXEL_FRAME.get(family, 0.30) * max(shape.megapixel_frames, 1e-3)

    return ThroughputModel(prior=prior)
