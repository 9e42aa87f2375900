"""Interruption rates from the Spot Instance Advisor buckets (a dated snapshot ships with the
package; `refresh` reads the public feed when it is reachable)."""

from __future__ import annotations

import json
import logging
import urllib.request
from dataclasses import dataclass
from importlib import resources
from typing import Any

HOURS_PER_MONTH = 730.0
log = logging.getLogger(__name__)
SNAPSHOT = "spot-advisor-gpu-2025-06.json"
FEED_URL = "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json"
# The advisor's buckets are "interruptions per month" bands; take the middle of each
# (the open top band ">20%" is taken as 25%).
_BUCKET_MONTHLY = {0: 0.025, 1: 0.075, 2: 0.125, 3: 0.175, 4: 0.25}


@dataclass(frozen=True)
class AdvisorEntry:
    savings_percent: int
    bucket: int

    @property
    def interruptions_per_hour(self) -> float:
        return _BUCKET_MONTHLY[self.bucket] / HOURS_PER_MONTH


class SpotAdvisor:
    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    @classmethod
    def shipped(cls) -> SpotAdvisor:
        text = resources.files("autoscaler").joinpath("data", SNAPSHOT).read_text()
        return cls(json.loads(text))

    @classmethod
    def from_feed(cls, feed: dict[str, Any]) -> SpotAdvisor:
        """The public feed's shape: spot_advisor[region]["Linux"][type] = {"s":…, "r":…}."""
        regions = feed["spot_advisor"]
        return cls({"spot_advisor": {r: v.get("Linux", {}) for r, v in regions.items()}})

    @classmethod
    def fetch_or_shipped(cls, url: str = FEED_URL, timeout: float = 5.0) -> SpotAdvisor:
        """The public feed when it answers (it is refreshed by AWS every few days); the
        shipped snapshot otherwise, for example on a machine without internet access."""
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310
                return cls.from_feed(json.loads(response.read()))
        except (OSError, ValueError, KeyError, AttributeError) as error:
            log.info("spot advisor feed unavailable (%s); using the shipped %s", error, SNAPSHOT)
            return cls.shipped()

    def entry(self, region: str, instance_type: str) -> AdvisorEntry | None:
        found = self._data["spot_advisor"].get(region, {}).get(instance_type)
        if found is None:
            return None
        return AdvisorEntry(int(found["s"]), int(found["r"]))
