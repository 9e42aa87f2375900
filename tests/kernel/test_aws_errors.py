"""One table of AWS error codes: each code that matters means one thing wherever it comes back,
and becomes one typed error. Errors are botocore's own ClientError, as the SDK raises them."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from botocore.parsers import ResponseParserError

from kernel.aws_errors import AWS_ERROR_CODES, AwsFault, classify, translated
from kernel.errors import (
    AccessDenied,
    AwsError,
    AwsUnavailable,
    MessageTooLarge,
    NotFound,
    QueueNotFound,
    Throttled,
)


def client_error(code: str, status: int = 400, message: str = "it failed") -> ClientError:
    response = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return ClientError(response, "SomeOperation")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("code", "fault"),
    [
        ("InsufficientInstanceCapacity", AwsFault.CAPACITY),
        ("MaxSpotInstanceCountExceeded", AwsFault.LIMIT),
        ("VcpuLimitExceeded", AwsFault.LIMIT),
        ("InstanceLimitExceeded", AwsFault.LIMIT),
        ("InsufficientFreeAddressesInSubnet", AwsFault.LIMIT),
        ("ThrottlingException", AwsFault.THROTTLED),
        ("RequestLimitExceeded", AwsFault.THROTTLED),
        ("SlowDown", AwsFault.THROTTLED),
        ("NoSuchBucket", AwsFault.NOT_FOUND),
        ("AWS.SimpleQueueService.NonExistentQueue", AwsFault.NOT_FOUND),
        ("AccessDenied", AwsFault.ACCESS_DENIED),
        ("UnauthorizedOperation", AwsFault.ACCESS_DENIED),
        ("PreconditionFailed", AwsFault.PRECONDITION_FAILED),
        ("SomethingNobodyDocumented", AwsFault.UNKNOWN),
    ],
)
def test_each_code_means_one_thing(code: str, fault: AwsFault) -> None:
    assert classify(code) is fault


@pytest.mark.parametrize(
    ("error", "typed"),
    [
        (client_error("ThrottlingException"), Throttled),
        (client_error("NoSuchBucket", 404), NotFound),
        (client_error("AWS.SimpleQueueService.NonExistentQueue"), QueueNotFound),
        (client_error("AccessDeniedException", 403), AccessDenied),
        (client_error("AWS.SimpleQueueService.MessageTooLong"), MessageTooLarge),
        (client_error("WeirdFailure", 503), AwsUnavailable),
        (client_error("WeirdFailure", 400), AwsError),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), AwsUnavailable),
        # An answer botocore cannot read (a proxy's error page): AWS out of reach, not a bug.
        (ResponseParserError("invalid XML received"), AwsUnavailable),
    ],
)
def test_each_failure_becomes_one_typed_error(error: Exception, typed: type[AwsError]) -> None:
    with pytest.raises(AwsError) as raised, translated("SomeOperation"):
        raise error
    assert type(raised.value) is typed
    assert "SomeOperation" in str(raised.value)


def test_a_missing_bucket_is_not_a_missing_queue() -> None:
    with pytest.raises(NotFound) as raised, translated("GetObject"):
        raise client_error("NoSuchBucket", 404)
    assert not isinstance(raised.value, QueueNotFound)


def test_every_fault_but_unknown_has_codes() -> None:
    assert set(AWS_ERROR_CODES.values()) == set(AwsFault) - {AwsFault.UNKNOWN}
