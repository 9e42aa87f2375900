"""The spot-trace format, parsed strictly (pydantic) and checked as a whole, so a trace that
cannot be replayed says what is missing instead of being replayed wrongly.

A trace folder holds one file per zone, `{zone}_{instance_type}.json` (skypilot-org/spot-traces):

    {"metadata": {"gap_seconds": 195, ...optional fields...}, "data": [0, 1, 3, ...],
     "prices": [USD/hour per tick, ...]}

- `data`: spot capacity per tick, as 0/1 or as a count of instances that could be had
  (0-16 in SkyPilot's multi-node traces): a zone has capacity at a tick when the value is > 0;
- spot prices, the first found: the file's `prices` (one per tick), the folder's
  `spot_prices.json` under `{zone}_{instance_type}` (or the V100 artifact's `{zone}_v100_1`),
  or a constant `metadata.spot_price`;
- `metadata.on_demand_price` (else the dated fallback table), `metadata.gpus` (else the
  instance catalog), `metadata.start` (ISO 8601: where a slice begins).

Every zone must have the same tick spacing and length (`docs/trace-format.schema.json` is the
JSON Schema of one zone file, generated from `ZoneFile`).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveFloat,
    ValidationError,
)

from autoscaler.market.on_demand import TABLE_DATE, fallback_price
from kernel.errors import ConfigurationError
from kernel.instance_types import CATALOG

MAX_TICKS = 5_000_000
MAX_FILE_BYTES = 256 * 1024 * 1024


class ZoneMetadata(BaseModel):
    model_config = ConfigDict(extra="ignore")

    gap_seconds: int = Field(gt=0, le=86_400, description="seconds between ticks")
    start: datetime | None = Field(default=None, description="the first tick (ISO 8601)")
    instance_type: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9-]+\.[a-z0-9]+$",
        description="the instance type (default: from the file name)",
    )
    on_demand_price: float | None = Field(default=None, gt=0, description="USD/hour")
    spot_price: float | None = Field(default=None, gt=0, description="constant USD/hour")
    gpus: int | None = Field(default=None, ge=1, le=64, description="GPUs per instance")


class ZoneFile(BaseModel):
    """One zone's trace (`{zone}_{instance_type}.json`)."""

    model_config = ConfigDict(extra="ignore", title="FrameFleet spot trace: one zone")

    metadata: ZoneMetadata
    data: list[NonNegativeInt] = Field(
        min_length=1,
        max_length=MAX_TICKS,
        description="spot capacity per tick: 0 none; > 0 available (a count of instances)",
    )
    prices: list[PositiveFloat] | None = Field(
        default=None, max_length=MAX_TICKS, description="spot price per tick, USD/hour"
    )


def read_zone_file(path: Path) -> ZoneFile:
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ConfigurationError(f"{path.name}: over {MAX_FILE_BYTES // 2**20} MiB")
    try:
        zone_file = ZoneFile.model_validate(json.loads(path.read_text()))
    except (ValueError, ValidationError) as error:
        raise ConfigurationError(f"{path.name} is not a zone trace: {error}") from None
    return zone_file


def spot_series(
    zone: str, instance_type: str, zone_file: ZoneFile, shared: dict[str, list[float]], name: str
) -> list[float]:
    family = "v100" if instance_type.startswith("p3.") else instance_type.split(".")[0]
    series = (
        zone_file.prices
        or shared.get(f"{zone}_{instance_type}")
        or shared.get(f"{zone}_{family}_1")
    )
    if series:
        if len(series) != len(zone_file.data):
            raise ConfigurationError(
                f"{name}: {len(series)} spot prices for {len(zone_file.data)} ticks"
            )
        # spot_prices.json is not parsed by the model: its values are checked here.
        if not all(isinstance(p, int | float) and p > 0 for p in series):
            raise ConfigurationError(f"{name}: spot prices must be numbers above 0")
        return [float(p) for p in series]
    if zone_file.metadata.spot_price is not None:
        return [zone_file.metadata.spot_price] * len(zone_file.data)
    raise ConfigurationError(
        f"no spot prices for {zone} ({name}): give the file a `prices` array, "
        f"spot_prices.json a `{zone}_{instance_type}` entry, or metadata.spot_price"
    )


def on_demand_price(zone: str, instance_type: str, zone_file: ZoneFile, name: str) -> float:
    region = zone[:-1]
    price = zone_file.metadata.on_demand_price or fallback_price(region, instance_type)
    if price is None:
        raise ConfigurationError(
            f"no on-demand price for {instance_type} in {region} ({name}): the fallback table "
            f"({TABLE_DATE}) does not list it; set metadata.on_demand_price"
        )
    return price


def gpus_of(instance_type: str, zone_file: ZoneFile, name: str) -> int:
    if zone_file.metadata.gpus is not None:
        return zone_file.metadata.gpus
    kind = CATALOG.get(instance_type)
    if kind is None:
        raise ConfigurationError(
            f"{name}: {instance_type} is not in the instance catalog; set metadata.gpus"
        )
    return kind.gpus


def trace_json_schema() -> dict[str, Any]:
    schema = ZoneFile.model_json_schema()
    schema["$id"] = "https://framefleet.dev/schemas/framefleet.trace-zone.v1.json"
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema
