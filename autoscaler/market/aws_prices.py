"""Live prices from AWS (aioboto3): spot price history and the Pricing API.

Thin adapters: boto stays here and its errors leave as FrameFleet's typed errors.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from kernel.aws_errors import translated

if TYPE_CHECKING:
    from types_aiobotocore_ec2.client import EC2Client
    from types_aiobotocore_pricing.client import PricingClient

# The Pricing API names regions by their console "location".
LOCATIONS = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-2": "US West (Oregon)",
    "eu-west-1": "EU (Ireland)",
    "eu-central-1": "EU (Frankfurt)",
    "ap-northeast-1": "Asia Pacific (Tokyo)",
}


async def spot_prices(
    ec2: EC2Client, instance_types: Sequence[str], now: datetime, window: timedelta
) -> dict[tuple[str, str], float]:
    """The latest Linux spot price per (type, AZ). The history call also returns the price in
    effect at StartTime, so a pool whose price did not change in the window still has one."""
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    with translated("DescribeSpotPriceHistory"):
        pages = ec2.get_paginator("describe_spot_price_history").paginate(
            InstanceTypes=list(instance_types),  # type: ignore[arg-type]
            ProductDescriptions=["Linux/UNIX"],
            StartTime=now - window,
            EndTime=now,
        )
        async for page in pages:
            for item in page.get("SpotPriceHistory", []):
                key = (item["InstanceType"], item["AvailabilityZone"])
                at, price = item["Timestamp"], float(item["SpotPrice"])
                if key not in latest or at > latest[key][0]:
                    latest[key] = (at, price)
    return {key: price for key, (_, price) in latest.items()}


def pricing_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    """The usual TERM_MATCH filters for one Linux, shared-tenancy, on-demand instance."""
    values = {
        "instanceType": instance_type,
        "location": LOCATIONS.get(region, region),
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }
    return [
        {"Type": "TERM_MATCH", "Field": field, "Value": value} for field, value in values.items()
    ]


def on_demand_price_of(product_json: str) -> float | None:
    """The hourly USD price in one GetProducts PriceList entry (a JSON document)."""
    product: dict[str, Any] = json.loads(product_json)
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            if dimension.get("unit") == "Hrs":
                usd = float(dimension.get("pricePerUnit", {}).get("USD", "0"))
                if usd > 0:
                    return usd
    return None


async def on_demand_price(pricing: PricingClient, instance_type: str, region: str) -> float | None:
    with translated("GetProducts"):
        response = await pricing.get_products(
            ServiceCode="AmazonEC2",
            Filters=pricing_filters(instance_type, region),  # type: ignore[arg-type]
            MaxResults=10,
        )
    for entry in response.get("PriceList", []):
        price = on_demand_price_of(entry if isinstance(entry, str) else json.dumps(entry))
        if price is not None:
            return price
    return None
