"""The FOCUS export against FOCUS 1.0's column definitions: every column the spec requires,
nulls only where it allows them, its enumerations, decimals, UTC datetimes, tags as a JSON
object, custom columns prefixed `x_`; and the Parquet file carries the same rows. (The
FinOps Foundation's focus-validator runs on the same export in `make focus-validate`.)"""

from __future__ import annotations

import csv
import json
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq

from kernel.clock import FakeClock
from orchestrator.costs.focus import COLUMNS, focus_rows, write_csv, write_parquet
from orchestrator.costs.ledger import CostLedger
from orchestrator.store.job_store import JobStore
from tests.support.fleet_history import FleetHistory, a_day_of_work

# FOCUS 1.0: column -> (type, may be null). Commitment columns are null without commitments.
SPEC: dict[str, tuple[str, bool]] = {
    "AvailabilityZone": ("string", True),
    "BilledCost": ("decimal", False),
    "BillingAccountId": ("string", False),
    "BillingAccountName": ("string", True),
    "BillingCurrency": ("currency", False),
    "BillingPeriodEnd": ("datetime", False),
    "BillingPeriodStart": ("datetime", False),
    "ChargeCategory": ("string", False),
    "ChargeClass": ("string", True),
    "ChargeDescription": ("string", True),
    "ChargeFrequency": ("string", True),
    "ChargePeriodEnd": ("datetime", False),
    "ChargePeriodStart": ("datetime", False),
    "CommitmentDiscountCategory": ("string", True),
    "CommitmentDiscountId": ("string", True),
    "CommitmentDiscountName": ("string", True),
    "CommitmentDiscountStatus": ("string", True),
    "CommitmentDiscountType": ("string", True),
    "ConsumedQuantity": ("decimal", True),
    "ConsumedUnit": ("string", True),
    "ContractedCost": ("decimal", False),
    "ContractedUnitPrice": ("decimal", True),
    "EffectiveCost": ("decimal", False),
    "InvoiceIssuerName": ("string", False),
    "ListCost": ("decimal", False),
    "ListUnitPrice": ("decimal", True),
    "PricingCategory": ("string", True),
    "PricingQuantity": ("decimal", True),
    "PricingUnit": ("string", True),
    "ProviderName": ("string", False),
    "PublisherName": ("string", False),
    "RegionId": ("string", True),
    "RegionName": ("string", True),
    "ResourceId": ("string", True),
    "ResourceName": ("string", True),
    "ResourceType": ("string", True),
    "ServiceCategory": ("string", False),
    "ServiceName": ("string", False),
    "SkuId": ("string", True),
    "SkuPriceId": ("string", True),
    "SubAccountId": ("string", True),
    "SubAccountName": ("string", True),
    "Tags": ("json", True),
}
ENUMS = {
    "ChargeCategory": {"Usage", "Purchase", "Tax", "Credit", "Adjustment"},
    "ChargeClass": {"", "Correction"},
    "ChargeFrequency": {"One-Time", "Recurring", "Usage-Based"},
    "PricingCategory": {"", "Standard", "Dynamic", "Committed", "Other"},
    "ServiceCategory": {
        "AI and Machine Learning",
        "Analytics",
        "Business Applications",
        "Compute",
        "Databases",
        "Developer Tools",
        "Multicloud",
        "Identity",
        "Integration",
        "Internet of Things",
        "Management and Governance",
        "Media",
        "Migration",
        "Mobile",
        "Networking",
        "Security",
        "Storage",
        "Web",
        "Other",
    },
}


def a_days_rows(store: JobStore, clock: FakeClock) -> list[dict[str, str]]:
    day, end = a_day_of_work(FleetHistory(store, clock))
    ledger = CostLedger(store.cost_facts, clock)
    period = ledger.period(day, end)
    return list(focus_rows(period, ledger.s3_usd(period.attempts), "123456789012"))


def test_the_export_follows_the_focus_1_0_column_definitions(
    store: JobStore, clock: FakeClock, tmp_path: Path
) -> None:
    rows = a_days_rows(store, clock)
    assert rows
    path = tmp_path / "focus.csv"
    write_csv(rows, path)
    with path.open(encoding="utf-8") as exported:
        reader = csv.DictReader(exported)
        assert reader.fieldnames is not None
        header = list(reader.fieldnames)
        read = list(reader)
    assert set(SPEC) <= set(header)
    assert all(name in SPEC or name.startswith("x_") for name in header)
    for row in read:
        for column, (kind, nullable) in SPEC.items():
            value = row[column]
            if not value:
                assert nullable, f"{column} may not be null"
                continue
            _check(kind, column, value)
        for column, allowed in ENUMS.items():
            assert row[column] in allowed, (column, row[column])
        assert (
            row["ChargePeriodStart"] < row["ChargePeriodEnd"] or row["ConsumedUnit"] == "Requests"
        )
        assert row["BillingPeriodStart"] <= row["ChargePeriodStart"] < row["BillingPeriodEnd"]
    spot = [
        r for r in read if r["x_FrameFleetMarket"] == "spot" and r["ServiceCategory"] == "Compute"
    ]
    assert spot
    assert all(r["PricingCategory"] == "Dynamic" for r in spot)
    assert all(Decimal(r["ListCost"]) >= Decimal(r["BilledCost"]) for r in spot)


def _check(kind: str, column: str, value: str) -> None:
    if kind == "decimal":
        Decimal(value)
    elif kind == "datetime":
        assert value.endswith("Z"), column
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    elif kind == "currency":
        assert value == "USD"
    elif kind == "json":
        assert isinstance(json.loads(value), dict)


def test_the_parquet_export_holds_the_same_rows(
    store: JobStore, clock: FakeClock, tmp_path: Path
) -> None:
    rows = a_days_rows(store, clock)
    write_parquet(rows, tmp_path / "focus.parquet")
    table = pq.read_table(tmp_path / "focus.parquet")
    assert table.column_names == list(COLUMNS)
    assert table.num_rows == len(rows)
    billed = sum(table.column("BilledCost").to_pylist(), Decimal(0))
    assert billed == sum((Decimal(r["BilledCost"]) for r in rows), Decimal(0))
