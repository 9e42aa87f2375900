"""Cents, allocated once, at the line items: every table of a report sums these.

A period's line items are the FOCUS export's rows: each ledger line's compute and its EBS
volume, and each job's S3 requests. The period's total is rounded to the cent once, and the
cents are apportioned over the items by largest remainder (`money.apportion`). Every table
(by category, day, pool, tag, job, model) then adds up item cents, so two tables never differ
by a cent, and both add up to the total and to the export's `x_FrameFleetBilledCents`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from orchestrator.costs.ledger import LedgerPeriod
from orchestrator.costs.money import ZERO, apportion


@dataclass(frozen=True)
class ItemCents:
    compute: list[Decimal]  # per ledger line, in the period's order
    ebs: list[Decimal]
    s3: dict[str, Decimal]  # per job

    def line(self, index: int) -> Decimal:
        return self.compute[index] + self.ebs[index]


def item_cents(period: LedgerPeriod, s3_by_job: Mapping[str, Decimal]) -> ItemCents:
    items: dict[tuple[str, int | str], Decimal] = {}
    for index, line in enumerate(period.lines):
        items[("compute", index)] = line.compute_usd
        items[("ebs", index)] = line.ebs_usd
    for job_id, usd in s3_by_job.items():
        items[("s3", job_id)] = usd
    allocated = apportion(items)
    count = len(period.lines)
    return ItemCents(
        [allocated[("compute", i)] for i in range(count)],
        [allocated[("ebs", i)] for i in range(count)],
        {job_id: allocated.get(("s3", job_id), ZERO) for job_id in s3_by_job},
    )
