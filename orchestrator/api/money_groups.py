"""The money page's groupings: a period's spend by team, project, customer, model, pool,
market or day. The summary's sums are cents allocated once at the line items, so every
grouping adds up to the same total, the finance report's; what no group caused (idle fleet time,
S3 requests) has a row of its own rather than vanishing."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Literal, get_args

from orchestrator.costs.money import ZERO
from orchestrator.costs.summary import FLEET, S3_ROW, CostSummary

Grouping = Literal["team", "project", "customer", "model", "pool", "market", "day"]
GROUPINGS: tuple[Grouping, ...] = get_args(Grouping)
NO_MODEL = "(no job: idle, draining, boot)"


def grouped(summary: CostSummary, by: Grouping) -> list[tuple[str, Decimal]]:
    """(group, USD in cents), largest first, adding up to the summary's total."""
    parts: dict[str, Decimal] = defaultdict(lambda: ZERO)
    if by in ("team", "project", "customer"):
        for (tag, value), usd in summary.by_tag.items():
            if tag == by:
                parts[value if value == FLEET else value or "(untagged)"] += usd
    elif by == "model":
        models = summary.by_model()
        for model, row in models.items():
            parts[model] += row.usd
        parts[NO_MODEL] = summary.total - sum((row.usd for row in models.values()), ZERO)
    elif by == "pool":
        parts.update(summary.by_pool)
        parts[S3_ROW] = summary.s3_usd
    else:
        for (day, market), usd in summary.by_day_market.items():
            parts[market.value if by == "market" else day.isoformat()] += usd
        parts[S3_ROW] = summary.s3_usd
    rows = [(name, usd) for name, usd in parts.items() if usd]
    if by == "day":
        return sorted(rows)
    return sorted(rows, key=lambda row: (-row[1], row[0]))
