"""Seconds per denoising step for (model, resolution, frames, GPU family): configured priors,
corrected online from finished jobs. It turns the queue into GPU-seconds of demand per family
and a job's remaining steps into time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# Seconds per step per megapixel-frame for a Wan-class video transformer (bf16), rough priors
# that the first finished jobs replace.
DEFAULT_PRIORS: Mapping[str, float] = {
    "t4": 0.30,
    "v100": 0.16,
    "a10g": 0.12,
    "l4": 0.14,
    "l40s": 0.06,
    "a100": 0.05,
    "h100": 0.025,
    "h200": 0.022,
}


@dataclass(frozen=True)
class WorkShape:
    model: str
    width: int
    height: int
    frames: int

    @property
    def megapixel_frames(self) -> float:
        return self.width * self.height * self.frames / 1e6


class ThroughputModel:
    def __init__(self, priors: Mapping[str, float] | None = None, weight: float = 0.3) -> None:
        self._priors = dict(priors or DEFAULT_PRIORS)
        self._weight = weight  # of each new observation in the running average
        self._exact: dict[tuple[WorkShape, str], float] = {}
        # Per (model, family): observed / prior, so one measured shape informs the others.
        self._scale: dict[tuple[str, str], float] = {}

    def families(self) -> list[str]:
        return sorted(self._priors)

    def seconds_per_step(self, shape: WorkShape, family: str) -> float:
        exact = self._exact.get((shape, family))
        if exact is not None:
            return exact
        prior = self._priors.get(family, max(self._priors.values()))
        return (
            prior * max(shape.megapixel_frames, 1e-3) * self._scale.get((shape.model, family), 1.0)
        )

    def seconds(self, shape: WorkShape, family: str, steps: int) -> float:
        return self.seconds_per_step(shape, family) * steps

    def observe(self, shape: WorkShape, family: str, steps: int, seconds: float) -> None:
        """A finished (or checkpointed) stretch of work: `steps` took `seconds` on `family`."""
        if steps <= 0 or seconds <= 0:
            return
        measured = seconds / steps
        key = (shape, family)
        old = self._exact.get(key)
        self._exact[key] = measured if old is None else old + self._weight * (measured - old)
        prior = self._priors.get(family)
        if prior:
            ratio = measured / (prior * max(shape.megapixel_frames, 1e-3))
            scale_key = (shape.model, family)
            was = self._scale.get(scale_key)
            self._scale[scale_key] = ratio if was is None else was + self._weight * (ratio - was)
