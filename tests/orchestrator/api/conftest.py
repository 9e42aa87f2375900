from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.served_api import ServedApi, serve_api


@pytest.fixture(scope="module")
def api(moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApi]:
    yield from serve_api(moto_endpoint, tmp_path_factory.mktemp("api"))
