"""Translate botocore failures into FrameFleet's typed errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import BotoCoreError, ClientError

from kernel.errors import (
    AwsError,
    AwsUnavailable,
    MessageTooLarge,
    QueueNotFound,
    Throttled,
)

_NOT_FOUND = {"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", "NoSuchBucket"}
_THROTTLED = {"Throttling", "ThrottlingException", "RequestThrottled", "SlowDown"}


@contextmanager
def translated(operation: str) -> Iterator[None]:
    try:
        yield
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", ""))
        message = str(error.response.get("Error", {}).get("Message", ""))
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        text = f"{operation}: {code}: {message}"
        if code in _NOT_FOUND:
            raise QueueNotFound(text) from None
        if code in _THROTTLED:
            raise Throttled(text) from None
        if "MessageTooLong" in code or "shorter than" in message or "too long" in message:
            raise MessageTooLarge(text) from None
        if status >= 500:
            raise AwsUnavailable(text) from None
        raise AwsError(text) from None
    except BotoCoreError as error:
        raise AwsUnavailable(f"{operation}: {error}") from None
