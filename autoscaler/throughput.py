"""Seconds per denoising step for (model, resolution, frames, GPU family): the step-time model's
prior (`kernel.step_time`: model size, tokens with the quadratic attention term, the family's
throughput in its dtype), corrected online from finished jobs. It turns the queue into
GPU-seconds of demand per family and a job's remaining steps into time."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kernel.step_time import (
    KNOWN_MODELS,
    PEAK_TFLOPS,
    Architecture,
    architecture_of,
    step_seconds,
)


@dataclass(frozen=True)
class WorkShape:
    model: str
    width: int
    height: int
    frames: int
    guided: bool = True  # classifier-free guidance: two transformer passes per step

    @property
    def megapixel_frames(self) -> float:
        return self.width * self.height * self.frames / 1e6


# Seconds per step of a shape on a family, before anything was measured.
StepPrior = Callable[[WorkShape, str], float]


def step_time_prior(models: Mapping[str, Architecture] = KNOWN_MODELS) -> StepPrior:
    """The step-time model, with these architectures known by name."""

    def prior(shape: WorkShape, family: str) -> float:
        arch = architecture_of(shape.model, models)
        return step_seconds(
            arch, shape.width, shape.height, shape.frames, family, guided=shape.guided
        )

    return prior


class ThroughputModel:
    def __init__(
        self,
        prior: StepPrior | None = None,
        weight: float = 0.3,
        families: tuple[str, ...] = tuple(PEAK_TFLOPS),
    ) -> None:
        self._prior = prior or step_time_prior()
        self._families = families
        self._weight = weight  # of each new observation in the running average
        self._exact: dict[tuple[WorkShape, str], float] = {}
        # Per (model, family): observed / prior, so one measured shape informs the others.
        self._scale: dict[tuple[str, str], float] = {}

    def families(self) -> list[str]:
        return sorted(self._families)

    def prior(self, shape: WorkShape, family: str) -> float:
        return max(self._prior(shape, family), 1e-6)

    def seconds_per_step(self, shape: WorkShape, family: str) -> float:
        exact = self._exact.get((shape, family))
        if exact is not None:
            return exact
        return self.prior(shape, family) * self._scale.get((shape.model, family), 1.0)

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
        ratio = measured / self.prior(shape, family)
        scale_key = (shape.model, family)
        was = self._scale.get(scale_key)
        self._scale[scale_key] = ratio if was is None else was + self._weight * (ratio - was)
