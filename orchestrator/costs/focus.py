"""The ledger as FinOps FOCUS 1.0 cost-and-usage rows, for the FinOps tools finance already
uses. One row per ledger line and resource (EC2 compute, the instance's EBS volume) and one
per job's S3 requests. Costs keep the ledger's precision (ten decimal places): FOCUS is data,
and rounding is for presentation; beside them, `x_FrameFleetBilledCents` holds each row's
cents as the finance report allocated them. Columns FOCUS does not define start with `x_`."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from kernel.market import Market
from orchestrator.costs.attribution import WASTE, CostLine
from orchestrator.costs.ledger import CostLedger, LedgerPeriod
from orchestrator.costs.line_items import item_cents
from orchestrator.costs.money import ZERO

PRECISION = Decimal("0.0000000001")

# FOCUS 1.0's columns, in the spec's order, then ours.
COLUMNS: tuple[str, ...] = (
    "AvailabilityZone",
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "CommitmentDiscountCategory",
    "CommitmentDiscountId",
    "CommitmentDiscountName",
    "CommitmentDiscountStatus",
    "CommitmentDiscountType",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "ContractedUnitPrice",
    "EffectiveCost",
    "InvoiceIssuerName",
    "ListCost",
    "ListUnitPrice",
    "PricingCategory",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "RegionId",
    "RegionName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "SkuId",
    "SkuPriceId",
    "SubAccountId",
    "SubAccountName",
    "Tags",
    "x_FrameFleetJobId",
    "x_FrameFleetCategory",
    "x_FrameFleetWaste",
    "x_FrameFleetMarket",
    "x_FrameFleetBilledCents",
)
# The row's cents as the report allocated them (costs/line_items.py): the report's every table
# is a sum of this column.
CENTS = "x_FrameFleetBilledCents"

Row = dict[str, str]
AWS = "Amazon Web Services"


def focus_rows(
    period: LedgerPeriod, s3_by_job: dict[str, Decimal], account_id: str
) -> Iterator[Row]:
    allocated = item_cents(period, s3_by_job)
    for index, line in enumerate(period.lines):
        yield _compute_row(line, account_id) | {CENTS: str(allocated.compute[index])}
        if line.ebs_usd > 0:
            yield _ebs_row(line, account_id) | {CENTS: str(allocated.ebs[index])}
    for job_id, usd in sorted(s3_by_job.items()):
        if usd > 0:
            yield _s3_row(job_id, usd, period, account_id) | {CENTS: str(allocated.s3[job_id])}


@dataclass(frozen=True)
class FocusExport:
    rows: list[Row]
    total: Decimal  # USD, the rows' sum
    incomplete: list[str]  # why the period's numbers may be short


def focus_export(
    ledger: CostLedger, since: datetime, until: datetime, account_id: str
) -> FocusExport:
    """The ledger's rows over [since, until] (the CLI's export and the API's)."""
    period = ledger.period(since, until)
    s3 = ledger.s3_usd(period.attempts)
    rows = list(focus_rows(period, s3, account_id))
    return FocusExport(rows, sum((period.total, *s3.values()), ZERO), period.incomplete)


def focus_csv(rows: Sequence[Row]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def write_csv(rows: Sequence[Row], path: Path) -> None:
    path.write_text(focus_csv(rows), encoding="utf-8", newline="")


def write_parquet(rows: Sequence[Row], path: Path) -> None:
    """Decimal columns as decimal128(38, 10), dates as UTC timestamps (pyarrow: the
    `parquet` extra)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fields = []
    for name in COLUMNS:
        if name in _DECIMALS:
            fields.append(pa.field(name, pa.decimal128(38, 10)))
        elif name in _DATES:
            fields.append(pa.field(name, pa.timestamp("s", tz="UTC")))
        else:
            fields.append(pa.field(name, pa.string()))
    columns: dict[str, list[object]] = {}
    for field in fields:
        values = [row[field.name] for row in rows]
        if field.name in _DECIMALS:
            columns[field.name] = [Decimal(v) if v else None for v in values]
        elif field.name in _DATES:
            columns[field.name] = [datetime.fromisoformat(v.replace("Z", "+00:00")) for v in values]
        else:
            columns[field.name] = [v or None for v in values]
    pq.write_table(pa.table(columns, schema=pa.schema(fields)), path)


_DECIMALS = frozenset(
    {
        "BilledCost",
        "ConsumedQuantity",
        "ContractedCost",
        "ContractedUnitPrice",
        "EffectiveCost",
        "ListCost",
        "ListUnitPrice",
        "PricingQuantity",
        CENTS,
    }
)
_DATES = frozenset(
    {"BillingPeriodEnd", "BillingPeriodStart", "ChargePeriodEnd", "ChargePeriodStart"}
)


def _compute_row(line: CostLine, account_id: str) -> Row:
    instance_type, zone, market = line.pool
    hours = _hours(line)
    price = line.compute_usd / hours if hours else ZERO
    listed = line.on_demand_usd / hours if hours else ZERO
    job = f" for job {line.job_id}" if line.job_id else ""
    return _common(line.start, line.end, account_id) | {
        "AvailabilityZone": zone,
        "BilledCost": _money(line.compute_usd),
        "ChargeDescription": f"{instance_type} {market.value} in {zone}: "
        f"{line.category.value}{job}",
        "ConsumedQuantity": _money(hours),
        "ConsumedUnit": "Hours",
        "ContractedCost": _money(line.compute_usd),
        "ContractedUnitPrice": _money(price),
        "EffectiveCost": _money(line.compute_usd),
        "ListCost": _money(line.on_demand_usd),
        "ListUnitPrice": _money(listed),
        "PricingCategory": "Dynamic" if market is Market.SPOT else "Standard",
        "PricingQuantity": _money(hours),
        "PricingUnit": "Hours",
        "RegionId": _region(zone),
        "RegionName": _region(zone),
        "ResourceId": line.instance_id,
        "ResourceName": line.instance_id,
        "ResourceType": "Virtual Machine",
        "ServiceCategory": "Compute",
        "ServiceName": "Amazon Elastic Compute Cloud",
        "SkuId": instance_type,
        "SkuPriceId": f"{instance_type}:{zone}:{market.value}",
        "Tags": _tags(line),
        "x_FrameFleetJobId": line.job_id or "",
        "x_FrameFleetCategory": line.category.value,
        "x_FrameFleetWaste": str(line.category in WASTE).lower(),
        "x_FrameFleetMarket": market.value,
    }


def _ebs_row(line: CostLine, account_id: str) -> Row:
    row = _compute_row(line, account_id)
    hours = _hours(line)
    return row | {
        "BilledCost": _money(line.ebs_usd),
        "ChargeDescription": f"EBS root volume of {line.instance_id}: {line.category.value}",
        "ContractedCost": _money(line.ebs_usd),
        "ContractedUnitPrice": _money(line.ebs_usd / hours if hours else ZERO),
        "EffectiveCost": _money(line.ebs_usd),
        "ListCost": _money(line.ebs_usd),
        "ListUnitPrice": _money(line.ebs_usd / hours if hours else ZERO),
        "PricingCategory": "Standard",
        "ResourceId": f"{line.instance_id}/root-volume",
        "ResourceName": f"{line.instance_id} root volume",
        "ResourceType": "Volume",
        "ServiceCategory": "Storage",
        "ServiceName": "Amazon Elastic Block Store",
        "SkuId": "gp3",
        "SkuPriceId": "gp3:GB-Mo",
    }


def _s3_row(job_id: str, usd: Decimal, period: LedgerPeriod, account_id: str) -> Row:
    return _common(period.since, period.until, account_id) | {
        "BilledCost": _money(usd),
        "ChargeDescription": f"S3 requests for job {job_id}: checkpoints and output",
        "ConsumedUnit": "Requests",
        "ContractedCost": _money(usd),
        "EffectiveCost": _money(usd),
        "ListCost": _money(usd),
        "PricingCategory": "Standard",
        "ResourceType": "Bucket",
        "ServiceCategory": "Storage",
        "ServiceName": "Amazon Simple Storage Service",
        "SkuId": "s3-standard-put",
        "x_FrameFleetJobId": job_id,
        "x_FrameFleetCategory": "storage",
        "x_FrameFleetWaste": "false",
    }


def _common(start: datetime, end: datetime, account_id: str) -> Row:
    month = datetime(start.year, start.month, 1, tzinfo=UTC)
    next_month = datetime(month.year + month.month // 12, month.month % 12 + 1, 1, tzinfo=UTC)
    row = dict.fromkeys(COLUMNS, "")
    return row | {
        "BillingAccountId": account_id,
        "BillingAccountName": account_id,
        "BillingCurrency": "USD",
        "BillingPeriodStart": _when(month),
        "BillingPeriodEnd": _when(next_month),
        "ChargeCategory": "Usage",
        "ChargeFrequency": "Usage-Based",
        "ChargePeriodStart": _when(start),
        "ChargePeriodEnd": _when(end),
        "InvoiceIssuerName": AWS,
        "ProviderName": AWS,
        "PublisherName": AWS,
        "Tags": "{}",
    }


def _hours(line: CostLine) -> Decimal:
    return line.instance_hours


def _money(value: Decimal) -> str:
    return str(value.quantize(PRECISION))


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _region(zone: str) -> str:
    return zone[:-1] if zone and zone[-1].isalpha() else zone


def _tags(line: CostLine) -> str:
    if line.tags is None:
        return "{}"
    return json.dumps(line.tags.model_dump(exclude_none=True), sort_keys=True)
