"""Whom the failed-authentication throttle counts (issue 48): by default the connection's peer,
whatever X-Forwarded-For says (uvicorn believed it from loopback, so rotating it made a
guesser new each time); behind `trusted_proxies` (the load balancer) each forwarded client on
its own, so one bad client does not lock out the others; and guesses at one token's secret
from everywhere, while the right secret still passes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.served_api import FAILED_AUTH_PER_MINUTE, ServedApi, from_address, serve_api


@pytest.fixture(scope="module")
def proxied(moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApi]:
    # The balancer's subnet: every loopback address but 127.0.0.9, a client of its own.
    trusted = '["127.0.0.1/32", "127.0.0.6/31", "127.0.0.8/32"]'
    yield from serve_api(
        moto_endpoint,
        tmp_path_factory.mktemp("proxied"),
        extra_env={"FRAMEFLEET_API__TRUSTED_PROXIES": trusted},
    )


def forwarded(client: str) -> dict[str, str]:
    return {"X-Forwarded-For": client}


def guess(i: int, client: str) -> dict[str, str]:
    """A made-up token (a prefix of its own each time: only the address ties them together)
    from `client`, as forwarded."""
    return {"Authorization": f"Bearer ff_guess{i}_nothere", **forwarded(client)}


def test_a_forwarded_address_is_not_believed_by_default(api: ServedApi) -> None:
    # From 127.0.0.1, which uvicorn's default trusted to forward (this test's module has
    # an API of its own: its loopback address may be held off).
    guesser = from_address(api, "127.0.0.1")
    statuses = [
        guesser.call("GET", "/v1/jobs", None, headers=guess(i, f"198.51.100.{i}")).status
        for i in range(FAILED_AUTH_PER_MINUTE + 1)
    ]
    assert statuses == [401] * FAILED_AUTH_PER_MINUTE + [429]


def test_behind_trusted_proxies_one_bad_client_does_not_hold_off_another(
    proxied: ServedApi,
) -> None:
    balancer = from_address(proxied, "127.0.0.6")
    statuses = [
        balancer.call("GET", "/v1/jobs", None, headers=guess(i, "203.0.113.7")).status
        for i in range(FAILED_AUTH_PER_MINUTE + 1)
    ]
    assert statuses == [401] * FAILED_AUTH_PER_MINUTE + [429]
    # Through the same balancer, another client's good token goes in.
    assert (
        balancer.call("GET", "/v1/jobs", "reader", headers=forwarded("203.0.113.8")).status == 200
    )
    # A client outside the trusted subnets names no one else: its own address counts.
    outsider = from_address(proxied, "127.0.0.9")
    assert (
        outsider.call("GET", "/v1/jobs", "reader", headers=forwarded("203.0.113.7")).status == 200
    )


def test_guesses_at_one_tokens_secret_are_held_off_and_the_token_still_works(
    proxied: ServedApi,
) -> None:
    balancer = from_address(proxied, "127.0.0.7")
    real = proxied.tokens["canceller"]
    prefix = real[: real.index("_", 3) + 1]
    statuses = [
        balancer.call(
            "GET",
            "/v1/jobs",
            None,
            headers={"Authorization": f"Bearer {prefix}wrong{i}", **forwarded(f"192.0.2.{i}")},
        ).status
        for i in range(FAILED_AUTH_PER_MINUTE + 1)
    ]
    assert statuses == [401] * FAILED_AUTH_PER_MINUTE + [429]
    assert (
        balancer.call("GET", "/v1/jobs", "canceller", headers=forwarded("192.0.2.99")).status == 200
    )
