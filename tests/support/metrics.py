"""Reading a process's operator endpoints: a GET, and /metrics parsed into samples."""

from __future__ import annotations

import aiohttp
from prometheus_client.parser import text_string_to_metric_families


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


async def samples(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, text = await get(url)
    assert status == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
