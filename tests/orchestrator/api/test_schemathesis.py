"""Schemathesis against the published document (`docs/openapi.json`), on SQLite and on
PostgreSQL: requests generated from every operation's schema, valid and not, each answered
with a 2xx, a 4xx or a 503, never a 500. The event stream (an endless response) is left to
its own tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode

from tests.support.local_services import own_postgres_schema
from tests.support.paths import DOCS
from tests.support.served_api import ServedApi, serve_api

DOCUMENT = DOCS / "openapi.json"
schema = schemathesis.openapi.from_path(DOCUMENT).exclude(path="/v1/events")
# Valid requests and invalid ones (wrong types, out of range, malformed): both must get a 4xx.
schema.config.generation.update(modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE])


# The rate limits have tests of their own; here every request must reach its handler.
UNLIMITED = {
    "FRAMEFLEET_API__REQUESTS_PER_MINUTE": "1000000",
    "FRAMEFLEET_API__FAILED_AUTH_PER_MINUTE": "1000000",
}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(
    request: pytest.FixtureRequest, moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServedApi]:
    folder = tmp_path_factory.mktemp(f"schemathesis-{request.param}")
    if request.param == "sqlite":
        yield from serve_api(moto_endpoint, folder, extra_env=UNLIMITED)
        return
    with own_postgres_schema() as url:
        yield from serve_api(moto_endpoint, folder, url, UNLIMITED)


@schema.parametrize()
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_no_request_gets_a_500(case: schemathesis.Case[Any], served: ServedApi) -> None:
    headers = {"Authorization": f"Bearer {served.tokens['admin']}"}
    response = case.call(base_url=served.base, headers=headers, timeout=20)
    assert response.status_code < 500 or response.status_code == 503, (
        f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:500]}"
    )
