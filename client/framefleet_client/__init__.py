"""FrameFleet's client for producers: submit, follow, cancel and download video jobs over the
HTTP API (`Client`), or send many through SQS (`framefleet_client.sqs.QueueSender`); check a
completion notice's signature (`framefleet_client.notices.verify`)."""

from framefleet_client.client import Client
from framefleet_client.errors import (
    ApiError,
    ClientError,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    RateLimited,
    ServerError,
    SqsRefused,
    Unauthorized,
    Unreachable,
    WaitTimedOut,
)
from framefleet_client.jobs import Job
from framefleet_client.transport import Event

__all__ = [
    "ApiError",
    "Client",
    "ClientError",
    "Conflict",
    "Event",
    "Forbidden",
    "Invalid",
    "Job",
    "NotFound",
    "RateLimited",
    "ServerError",
    "SqsRefused",
    "Unauthorized",
    "Unreachable",
    "WaitTimedOut",
]
