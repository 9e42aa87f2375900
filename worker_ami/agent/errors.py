"""Typed errors of the worker agent. `JobFault` means the job itself cannot succeed (retrying
elsewhere burns GPUs for nothing); everything else is the worker's or the instance's fault."""

from __future__ import annotations

from kernel.errors import FrameFleetError


class WorkerError(FrameFleetError):
    pass


class JobFault(WorkerError):
    """The job cannot succeed anywhere: unknown model, out of memory, non-finite latents."""


class UnknownModel(JobFault):
    pass


class NonFiniteLatents(JobFault):
    pass


class ObjectNotFound(WorkerError):
    pass


class OutputRefused(JobFault):
    """The job's output location refuses this fleet's writes (no bucket there, or no
    permission): every worker would render the job only to fail its upload."""


class ObjectStoreError(WorkerError):
    pass


class CheckpointRejected(WorkerError):
    """A checkpoint failed verification (bad manifest, missing or altered blob, wrong job)."""


class ModelCacheError(WorkerError):
    """The model could not be fetched or failed its checksum."""


class PreflightFailed(WorkerError):
    def __init__(self, reasons: tuple[str, ...]) -> None:
        self.reasons = reasons
        super().__init__("preflight failed: " + "; ".join(reasons))


class ImdsError(WorkerError):
    pass
