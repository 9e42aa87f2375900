"""What can go wrong, one class each, so that a producer handles each on its own."""

from __future__ import annotations


class ClientError(Exception):
    """Every error of this client."""


class Unreachable(ClientError):
    """No answer: the API could not be reached, or the connection broke."""


class ApiError(ClientError):
    """The API answered with an error status; `detail` is its reason."""

    status = 0

    def __init__(self, status: int, detail: str, errors: tuple[str, ...] = ()) -> None:
        self.status, self.detail, self.errors = status, detail, errors
        lines = "".join(f"\n  {line}" for line in errors)
        super().__init__(f"HTTP {status}: {detail}{lines}")


class Unauthorized(ApiError):
    """401: no token, a wrong one, an expired or a revoked one."""


class Forbidden(ApiError):
    """403: the token may not do this (a scope it lacks, another team's fleet)."""


class NotFound(ApiError):
    """404: no such job (or not one the token's teams may see), token or message."""


class Conflict(ApiError):
    """409: the job is not in a state that allows it, or its id is taken."""


class Invalid(ApiError):
    """422 (or 400, 413): the request is refused as it is; `errors` names each problem."""


class RateLimited(ApiError):
    """429: too many requests; `retry_after` seconds until the next may pass."""

    retry_after: float | None = None


class ServerError(ApiError):
    """5xx: the API failed; the request may be retried."""


class WaitTimedOut(ClientError):
    """`wait` gave up before the job ended."""


class SqsRefused(ClientError):
    """SQS refused some of a batch's messages: `failed` maps each job id to the reason."""

    def __init__(self, failed: dict[str, str]) -> None:
        self.failed = failed
        super().__init__(f"SQS refused {len(failed)} messages: {failed}")


def error_for(status: int, detail: str, errors: tuple[str, ...] = ()) -> ApiError:
    kind: type[ApiError]
    if status == 401:
        kind = Unauthorized
    elif status == 403:
        kind = Forbidden
    elif status == 404:
        kind = NotFound
    elif status == 409:
        kind = Conflict
    elif status == 429:
        kind = RateLimited
    elif status >= 500:
        kind = ServerError
    else:
        kind = Invalid
    return kind(status, detail, errors)
