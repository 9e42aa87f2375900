"""On-demand list prices used when the Pricing API cannot be asked (no credentials for it, no
network, or a type it does not list yet). Dated: prices change; the Pricing API wins.

USD per instance-hour, Linux, shared tenancy, from the EC2 on-demand pricing page as of
2025-06. us-east-2 and us-west-2 list the same prices as us-east-1 for these types.
"""

from __future__ import annotations

TABLE_DATE = "2025-06"
_US_EAST_1 = {
    "g4dn.xlarge": 0.526,
    "g4dn.2xlarge": 0.752,
    "g4dn.12xlarge": 3.912,
    "g5.xlarge": 1.006,
    "g5.2xlarge": 1.212,
    "g5.12xlarge": 5.672,
    "g5.48xlarge": 16.288,
    "g6.xlarge": 0.8048,
    "g6.2xlarge": 0.9776,
    "g6.12xlarge": 4.6016,
    "g6e.xlarge": 1.861,
    "g6e.2xlarge": 2.24208,
    "g6e.12xlarge": 10.49264,
    "p3.2xlarge": 3.06,
    "p3.8xlarge": 12.24,
    "p4d.24xlarge": 32.7726,
    "p5.48xlarge": 55.04,
}
ON_DEMAND_FALLBACK: dict[str, dict[str, float]] = {
    region: dict(_US_EAST_1) for region in ("us-east-1", "us-east-2", "us-west-2")
}


def fallback_price(region: str, instance_type: str) -> float | None:
    return ON_DEMAND_FALLBACK.get(region, {}).get(instance_type)
