"""One table of the AWS error codes FrameFleet meets and what each means, and the translation
of botocore failures into FrameFleet's typed errors. Adapters (SQS, S3, EC2) classify through
here only, so a code means the same thing wherever it comes back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum

from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError

from kernel.errors import (
    AccessDenied,
    AwsError,
    AwsUnavailable,
    MessageTooLarge,
    NotFound,
    QueueNotFound,
    Throttled,
)

# What the wire can do besides answering with an AWS error: no connection, a timeout, or an
# answer botocore cannot read (a proxy's error page; botocore's parser error is no
# BotoCoreError). Each means AWS is out of reach for now, not that the request was wrong.
UNREACHABLE = (BotoCoreError, ResponseParserError)


class AwsFault(StrEnum):
    CAPACITY = "capacity"  # this pool cannot serve a launch now: buy elsewhere, retry later
    # An account or subnet limit (a vCPU quota, the spot instance count, the subnet's free
    # addresses): every pool under that limit fails alike until it frees or AWS raises it.
    LIMIT = "limit"
    THROTTLED = "throttled"  # too many calls: back off and retry
    NOT_FOUND = "not_found"  # the queue, bucket, key or instance does not exist
    ACCESS_DENIED = "access_denied"  # the role lacks a permission: a configuration fault
    PRECONDITION_FAILED = "precondition_failed"  # a conditional write found something there
    TOO_LARGE = "too_large"  # the message is over the service's limit
    UNAVAILABLE = "unavailable"  # a server error or no connection: retry
    UNKNOWN = "unknown"


AWS_ERROR_CODES: dict[str, AwsFault] = {
    # EC2 (RunInstances, CreateFleet errors): the pool has no capacity for us right now.
    **dict.fromkeys(
        [
            "InsufficientInstanceCapacity",
            "InsufficientCapacity",
            "InsufficientHostCapacity",
            "SpotMaxPriceTooLow",
            "UnfulfillableCapacity",
            "capacity-not-available",
            "price-too-low",
        ],
        AwsFault.CAPACITY,
    ),
    **dict.fromkeys(
        [
            "VcpuLimitExceeded",
            "InstanceLimitExceeded",
            "MaxSpotInstanceCountExceeded",
            "InsufficientFreeAddressesInSubnet",
        ],
        AwsFault.LIMIT,
    ),
    **dict.fromkeys(
        [
            "Throttling",
            "ThrottlingException",
            "RequestThrottled",
            "RequestLimitExceeded",
            "SlowDown",
            "TooManyRequestsException",
        ],
        AwsFault.THROTTLED,
    ),
    **dict.fromkeys(
        [
            "AWS.SimpleQueueService.NonExistentQueue",
            "QueueDoesNotExist",
            "NoSuchBucket",
            "NoSuchKey",
            "NotFound",
            "404",
            "InvalidInstanceID.NotFound",
            "InvalidLaunchTemplateName.NotFoundException",
            "ParameterNotFound",
            "NoSuchResourceException",
        ],
        AwsFault.NOT_FOUND,
    ),
    **dict.fromkeys(
        [
            "AccessDenied",
            "AccessDeniedException",
            "UnauthorizedOperation",
            "InvalidClientTokenId",
            "SignatureDoesNotMatch",
            "ExpiredToken",
        ],
        AwsFault.ACCESS_DENIED,
    ),
    **dict.fromkeys(
        ["PreconditionFailed", "412", "ConditionalRequestConflict"],
        AwsFault.PRECONDITION_FAILED,
    ),
    **dict.fromkeys(
        ["AWS.SimpleQueueService.MessageTooLong", "MessageTooLong", "EntityTooLarge"],
        AwsFault.TOO_LARGE,
    ),
    **dict.fromkeys(
        ["InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable"],
        AwsFault.UNAVAILABLE,
    ),
}
_QUEUE_CODES = {"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"}


def classify(code: str, status: int = 0, message: str = "") -> AwsFault:
    """What an AWS error means, from its code (then its HTTP status)."""
    fault = AWS_ERROR_CODES.get(code)
    if fault is not None:
        return fault
    if "shorter than" in message or "too long" in message:
        return AwsFault.TOO_LARGE  # SQS says so in prose for some limits
    if status >= 500:
        return AwsFault.UNAVAILABLE
    return AwsFault.UNKNOWN


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def to_typed_error(operation: str, error: ClientError) -> AwsError:
    code = error_code(error)
    message = str(error.response.get("Error", {}).get("Message", ""))
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
    text = f"{operation}: {code}: {message}"
    fault = classify(code, status, message)
    if fault is AwsFault.NOT_FOUND:
        return QueueNotFound(text) if code in _QUEUE_CODES else NotFound(text)
    typed: dict[AwsFault, type[AwsError]] = {
        AwsFault.THROTTLED: Throttled,
        AwsFault.ACCESS_DENIED: AccessDenied,
        AwsFault.TOO_LARGE: MessageTooLarge,
        AwsFault.UNAVAILABLE: AwsUnavailable,
    }
    return typed.get(fault, AwsError)(text)


@contextmanager
def translated(operation: str) -> Iterator[None]:
    try:
        yield
    except ClientError as error:
        raise to_typed_error(operation, error) from None
    except UNREACHABLE as error:
        raise AwsUnavailable(f"{operation}: {error}") from None
