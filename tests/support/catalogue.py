"""A test that teaches the process's instance catalogue (`kernel.instance_types.learn`) leaves
it as shipped for the tests after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kernel.instance_types import CATALOG


@pytest.fixture
def shipped_catalogue() -> Iterator[None]:
    before = dict(CATALOG)
    yield
    CATALOG.clear()
    CATALOG.update(before)
