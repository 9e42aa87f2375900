"""Where capacity comes from: an instance type in an availability zone on a market."""

from __future__ import annotations

from dataclasses import dataclass

from kernel.market import Market


@dataclass(frozen=True, order=True)
class Pool:
    instance_type: str
    availability_zone: str
    market: Market

    @property
    def region(self) -> str:
        return self.availability_zone.rstrip("abcdefghijklmnopqrstuvwxyz")

    def __str__(self) -> str:
        return f"{self.instance_type}/{self.availability_zone}/{self.market.value}"
