"""Who is asking, and may they: the bearer token (or the console's cookie holding it), the
scope the route needs, and the per-token rate limit (the `limits` library's moving window).

A request without a valid token gets 401, a token without the scope 403, a token over its
rate 429. Failed authentication is limited per client address: past `failed_auth_per_minute`
failures, that address gets 429 before any token it sends is even looked up. The client address
is the connection's peer, or X-Forwarded-For's where the peer is one of `trusted_proxies` (the
load balancer), so a client cannot name itself anew with each guess, and clients behind one
balancer are not one address. Guesses at one token's secret (its `ff_<id>_` prefix, sent from
anywhere) are limited too: past the limit they get 429, while the right secret still passes,
so no one else's guessing locks a good token out.

The console's cookie is HttpOnly and SameSite=Strict; a request that changes
something with it must also carry the console's header, which no other site can add (no
CORS is served), so a page elsewhere cannot cancel jobs in a logged-in user's name.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from limits import RateLimitItemPerMinute, storage, strategies

from kernel.job_record import JobRecord
from orchestrator.api.auth import Caller, Scope, caller_of
from orchestrator.api.ports import ApiServices

COOKIE = "framefleet_token"
CONSOLE_HEADER = "X-FrameFleet-Console"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SSO_HEADER = (
    "x-amzn-oidc-data"  # the load balancer's signed claims (orchestrator/api/alb_identity.py)
)


class RateLimit:
    """Requests (or failures) per minute of each key (a token, an address), in this process
    (a replica limits on its own)."""

    def __init__(self, per_minute: int) -> None:
        self._item = RateLimitItemPerMinute(per_minute)
        self._limiter = strategies.MovingWindowRateLimiter(storage.MemoryStorage())

    def retry_after(self, token_id: str) -> int | None:
        """None: go ahead; else the seconds until the window lets this token in again."""
        if self._limiter.hit(self._item, token_id):
            return None
        stats = self._limiter.get_window_stats(self._item, token_id)
        return max(1, math.ceil(stats.reset_time - time.time()))

    def exhausted(self, key: str) -> bool:
        """Over its rate now (without counting this as a request)."""
        return not self._limiter.test(self._item, key)

    def count(self, key: str) -> None:
        self._limiter.hit(self._item, key)


def source_of(request: Request) -> str:
    """The client's address: the peer's, or the one a trusted proxy forwarded (uvicorn's
    proxy headers, on only for `trusted_proxies`)."""
    return request.client.host if request.client else "unknown"


def token_prefix(token: str) -> str | None:
    """The `ff_<id>_` a token claims, the key its guesses are counted under."""
    parts = token.split("_")
    return f"ff_{parts[1]}_" if len(parts) == 3 and parts[0] == "ff" and parts[1] else None


def refuse_if_failing(request: Request) -> None:
    """429 for an address past its failed authentications this minute."""
    failures: RateLimit = request.app.state.failed_auth
    if failures.exhausted(source_of(request)):
        raise HTTPException(
            429, "too many failed authentications from this address", headers={"Retry-After": "60"}
        )


def count_failure(request: Request, token: str = "") -> None:
    """One more failure for the client's address, and for the token prefix it guessed at;
    429 once that prefix's guesses are past the limit (401 before)."""
    failures: RateLimit = request.app.state.failed_auth
    failures.count(source_of(request))
    prefix = token_prefix(token)
    if prefix is None:
        return
    if failures.exhausted(prefix):
        raise HTTPException(
            429, "too many failed authentications for this token", headers={"Retry-After": "60"}
        )
    failures.count(prefix)


def services(request: Request) -> ApiServices:
    found: ApiServices = request.app.state.services
    return found


bearer = HTTPBearer(auto_error=False, description="an API token: `framefleet tokens create`")
Bearer = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def authenticate(request: Request, credentials: Bearer) -> Caller:
    """The caller of a request with a bearer token, the load balancer's sign-on header, or
    the console's cookie."""
    if credentials is not None and credentials.credentials:
        return check_token(request, credentials.credentials, from_cookie=False)
    return signed_on(request) or check_token(request, request.cookies.get(COOKIE), from_cookie=True)


def signed_on(request: Request) -> Caller | None:
    """The person the load balancer signed on (single sign-on), when it is configured and its
    header checks out; a change needs the console's header, as with the cookie (CSRF)."""
    identity = services(request).identity
    header = request.headers.get(SSO_HEADER)
    if identity is None or not header:
        return None
    caller = identity(header)
    return admitted(request, caller, "the console's sign-on") if caller is not None else None


def check_token(request: Request, token: str | None, from_cookie: bool) -> Caller:
    if token is None:
        raise HTTPException(
            401,
            "a token is needed: Authorization: Bearer <token>",
            headers={"WWW-Authenticate": "Bearer"},
        )
    refuse_if_failing(request)
    found = services(request)
    caller = caller_of(found.store.api_tokens, token, found.clock.now())
    if caller is None:
        count_failure(request, token)
        challenge = 'Bearer error="invalid_token"'
        raise HTTPException(
            401, "the token is unknown or revoked", headers={"WWW-Authenticate": challenge}
        )
    return admitted(request, caller, "the console's cookie" if from_cookie else None)


def admitted(request: Request, caller: Caller, browser: str | None) -> Caller:
    """A known caller let in: a change made from a browser (`browser`: by what it was
    recognised) carries the console's own header, which another site cannot send (CSRF); the
    caller's rate limit holds; the access log names it (never its token)."""
    if (
        browser
        and request.method not in SAFE_METHODS
        and request.headers.get(CONSOLE_HEADER) != "1"
    ):
        raise HTTPException(403, f"a change made with {browser} needs the {CONSOLE_HEADER} header")
    limit: RateLimit = request.app.state.rate_limit
    wait = limit.retry_after(caller.token_id)
    if wait is not None:
        raise HTTPException(
            429, "too many requests for this token", headers={"Retry-After": str(wait)}
        )
    request.state.caller = caller
    return caller


def needs(scope: Scope) -> Callable[[Caller], Caller]:
    def check(caller: Annotated[Caller, Depends(authenticate)]) -> Caller:
        if not caller.may(scope):
            raise HTTPException(403, f"this token lacks the {scope.value!r} scope")
        return caller

    return check


def every_team(caller: Annotated[Caller, Depends(needs(Scope.READ))]) -> Caller:
    """The fleet and the whole bill are every team's at once: an operator's token only."""
    if caller.teams is not None:
        raise HTTPException(403, "the fleet and the fleet's costs need a token of every team")
    return caller


def visible_job(services: ApiServices, caller: Caller, job_id: str) -> JobRecord:
    """The job, if it is the caller's team's; else 404, as if there were none (a team's token
    does not learn which job ids other teams use)."""
    job = services.store.find(job_id)
    if job is None or not caller.sees(job.spec.tags.team):
        raise HTTPException(404, f"no job {job_id!r}")
    return job


def administrator(caller: Annotated[Caller, Depends(needs(Scope.ADMIN))]) -> Caller:
    """Tokens are made and revoked by an operator's admin token only: a team's admin token
    could otherwise mint one of every team."""
    if caller.teams is not None:
        raise HTTPException(403, "tokens are managed with an admin token of every team")
    return caller


Reader = Annotated[Caller, Depends(needs(Scope.READ))]
Administrator = Annotated[Caller, Depends(administrator)]
Operator = Annotated[Caller, Depends(every_team)]
Submitter = Annotated[Caller, Depends(needs(Scope.SUBMIT))]
Canceller = Annotated[Caller, Depends(needs(Scope.CANCEL))]
Services = Annotated[ApiServices, Depends(services)]
