"""Models are known at the door: a job naming a model the registry does not hold, or needing
more GPU memory than any GPU FrameFleet buys, is refused before it costs a boot; a job the
registry knows gets the model's own GPU need (`kernel/model_memory.model_need_gib`) where that
is more than its producer's figure, so the scheduler, the autoscaler and the worker's preflight
all see one need.

The registry is read again every `refresh` (a new entry counts without a restart); each model's
weights' size is read once per revision from its published manifest. Until the registry has
been read once, jobs are admitted as before (the door says so in the log).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol

from kernel.clock import Clock, sleep_unless_stopped
from kernel.errors import FrameFleetError
from kernel.input_spec import MAX_ADAPTER_BYTES, MAX_IMAGE_BYTES, image_type
from kernel.instance_types import CATALOG
from kernel.job_spec import JobSpec
from kernel.model_family import option_refusal
from kernel.model_memory import model_need_gib, resolution_class, span_share_gib
from kernel.model_registry import ModelRegistry, weights_bytes

log = logging.getLogger(__name__)

LARGEST_GPU_GIB = max(kind.vram_gib for kind in CATALOG.values())  # what FrameFleet can buy


@dataclass(frozen=True)
class ObjectProbe:
    """What the door reads of a job's input object: its size and first bytes."""

    size: int
    head: bytes


class RegistryReader(Protocol):
    async def registry(self) -> bytes: ...

    async def manifest(self, uri: str) -> bytes | None:
        """The published model's `framefleet-model.json` at `uri`, None if there is none."""
        ...

    async def probe(self, uri: str, first: int) -> ObjectProbe | str:
        """The object at `uri` (its size and `first` bytes), or why it cannot be read."""
        ...


class DoorReason(StrEnum):  # on the wire: the dead letter's `framefleet-reason`
    UNKNOWN_MODEL = "unknown_model"
    IMPOSSIBLE_NEED = "impossible_need"
    BAD_INPUT = "bad_input"


@dataclass(frozen=True)
class DoorRefusal:
    reason: DoorReason
    error: str


class ModelDoor:
    def __init__(
        self, reader: RegistryReader, clock: Clock, refresh: timedelta = timedelta(seconds=60)
    ) -> None:
        self._reader, self._clock, self._refresh = reader, clock, refresh
        self._registry: ModelRegistry | None = None
        self._weights: dict[tuple[str, str], int | None] = {}  # (model, revision) -> bytes
        self.read_at: datetime | None = None

    async def refresh(self) -> None:
        """Read the registry (and any new model's weights' size). A failed read keeps the last
        one: the door never closes because S3 blinked."""
        try:
            registry = ModelRegistry.parse(await self._reader.registry(), "registry")
            for name, entry in registry.models.items():
                if (name, entry.revision) not in self._weights:
                    found = await self._reader.manifest(entry.uri)
                    self._weights[(name, entry.revision)] = weights_bytes(found) if found else None
        except FrameFleetError as error:
            log.warning("model registry not read (the last read stands): %s", error)
            return
        self._registry, self.read_at = registry, self._clock.now()

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.refresh()
            await sleep_unless_stopped(self._clock, stop, self._refresh.total_seconds())

    def admit(self, spec: JobSpec) -> JobSpec | DoorRefusal:
        """The job as it is accepted (its GPU need raised to its model's), or why not."""
        registry = self._registry
        if registry is None:
            return spec
        entry = registry.models.get(spec.model)
        if entry is None:
            known = ", ".join(sorted(registry.models)[:20]) or "none"
            return DoorRefusal(
                DoorReason.UNKNOWN_MODEL,
                f"model {spec.model!r} is not in the model registry (known: {known})",
            )
        problem = option_refusal(
            entry.family, spec.image, spec.width, spec.height, spec.num_frames
        ) or self._adapter_refusal(registry, spec)
        if problem is not None:
            return DoorRefusal(DoorReason.BAD_INPUT, f"{spec.model}: {problem}")
        dtype = entry.precision.compute
        weights = self._weights.get((spec.model, entry.revision))
        need = model_need_gib(
            spec.model, spec.width, spec.height, dtype, entry.memory_gib, weights, entry.family
        )
        if need is not None and spec.gpu.count > 1:
            need = span_share_gib(need, spec, dtype)
        per_gpu = max(need or 0.0, spec.gpu.min_vram_gib)
        if per_gpu > LARGEST_GPU_GIB:
            where = resolution_class(spec.width, spec.height) or f"{spec.width}x{spec.height}"
            return DoorRefusal(
                DoorReason.IMPOSSIBLE_NEED,
                f"needs {per_gpu:.1f} GiB of GPU memory per GPU ({spec.model}, {where}, "
                f"{dtype}); the largest GPU FrameFleet buys has {LARGEST_GPU_GIB:g} GiB: "
                "render fewer pixels or span more GPUs (gpu.count)",
            )
        if per_gpu <= spec.gpu.min_vram_gib:
            return spec
        gpu = spec.gpu.model_copy(update={"min_vram_gib": per_gpu})
        return spec.model_copy(update={"gpu": gpu})

    @staticmethod
    def _adapter_refusal(registry: ModelRegistry, spec: JobSpec) -> str | None:
        for adapter in spec.adapters:
            if adapter.name is None:
                continue
            found = registry.adapters.get(adapter.name)
            if found is None:
                return f"adapter {adapter.name!r} is not in the model registry"
            if found.base != spec.model:
                return f"adapter {adapter.name!r} was made for {found.base}, not this model"
        return None

    async def inputs_refusal(self, spec: JobSpec) -> DoorRefusal | None:
        """Why the job's input objects cannot be used, if so: an image that is missing,
        unreadable, too large or not a PNG, JPEG or WebP; an adapter file that is missing or
        too large. Read from S3 (a size and a few bytes each), so only for a job that has any;
        checked after `admit`."""
        if spec.image is not None:
            found = await self._reader.probe(spec.image, 16)
            problem = (
                found
                if isinstance(found, str)
                else f"{found.size} bytes, more than {MAX_IMAGE_BYTES}"
                if found.size > MAX_IMAGE_BYTES
                else None
                if image_type(found.head)
                else "not a PNG, JPEG or WebP image"
            )
            if problem is not None:
                return DoorRefusal(DoorReason.BAD_INPUT, f"image {spec.image}: {problem}")
        registry = self._registry
        for adapter in spec.adapters:
            uri = adapter.uri
            if uri is None and registry is not None and adapter.name in registry.adapters:
                uri = registry.adapters[adapter.name].uri
            if uri is None:
                continue
            probed = await self._reader.probe(uri, 8)
            if isinstance(probed, str) or probed.size > MAX_ADAPTER_BYTES:
                why = probed if isinstance(probed, str) else f"{probed.size} bytes, too large"
                return DoorRefusal(DoorReason.BAD_INPUT, f"adapter {uri}: {why}")
        return None
