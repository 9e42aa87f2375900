"""Typed errors. Adapters translate library exceptions into these; nothing else escapes them."""

from __future__ import annotations


class FrameFleetError(Exception):
    """Base of every error FrameFleet raises on purpose; the CLI prints these as one line."""


class ConfigurationError(FrameFleetError):
    """Settings are missing or inconsistent."""


class JobValidationError(FrameFleetError):
    """A job message does not satisfy the framefleet.job/v1 protocol."""

    def __init__(self, errors: tuple[str, ...]) -> None:
        self.errors = errors
        super().__init__("invalid job: " + "; ".join(errors))


class JobNotFound(FrameFleetError):
    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        super().__init__(f"job {job_id!r} not found")


class InvalidTransition(FrameFleetError):
    """A state machine (a job's, a worker's health, an instance's) does not allow this move."""

    def __init__(self, subject: str, current: str, target: str) -> None:
        self.subject, self.current, self.target = subject, current, target
        super().__init__(f"{subject}: transition {current} -> {target} is not allowed")


class ConcurrentModification(FrameFleetError):
    """Another writer moved the job first (optimistic concurrency on the version column)."""

    def __init__(self, job_id: str, expected_version: int) -> None:
        self.job_id, self.expected_version = job_id, expected_version
        super().__init__(
            f"job {job_id!r} was modified concurrently: expected version {expected_version}, "
            "somebody else changed it first; reload and decide again"
        )


class StoreUnavailable(FrameFleetError):
    """The database could not be reached or refused the operation."""


class AwsError(FrameFleetError):
    """Base for AWS failures translated inside adapters."""


class NotFound(AwsError):
    """The queue, bucket, key or instance does not exist."""


class QueueNotFound(NotFound):
    pass


class AccessDenied(AwsError):
    """The credentials lack a permission: a configuration fault, not worth retrying."""


class Throttled(AwsError):
    pass


class MessageTooLarge(AwsError):
    pass


class AwsUnavailable(AwsError):
    """The endpoint could not be reached, or answered with a server error."""
