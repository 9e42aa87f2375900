"""The report's charts as PNG bytes (matplotlib, no display): spend per day by market, where
the money went (waste apart), what spot saved, and the costliest jobs and teams."""

from __future__ import annotations

import io
from collections import defaultdict
from decimal import Decimal
from typing import TYPE_CHECKING

from kernel.market import Market
from orchestrator.costs.attribution import WASTE, Category
from orchestrator.costs.money import cents
from orchestrator.costs.summary import CostSummary

if TYPE_CHECKING:
    from matplotlib.figure import Figure

COLOURS = {Market.SPOT: "#2b8cbe", Market.ON_DEMAND: "#e6550d"}
CATEGORY_COLOURS = {
    Category.WORK: "#31a354",
    Category.STARTUP: "#9ecae1",
    Category.CHECKPOINT: "#6baed6",
    Category.LOST: "#de2d26",
    Category.IDLE: "#fc9272",
    Category.DRAINING: "#fcbba1",
}
TOP = 10


def charts(summary: CostSummary) -> dict[str, bytes]:
    """File name -> PNG."""
    # Imported here: matplotlib takes half a second, which every command would pay.
    import matplotlib

    matplotlib.use("Agg")
    return {
        "spend-by-day.png": _png(_by_day(summary)),
        "where-the-money-went.png": _png(_categories(summary)),
        "savings.png": _png(_savings(summary)),
        "top-jobs-and-teams.png": _png(_top(summary)),
    }


def _figure(width: float = 7.0, height: float = 3.2) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=110, layout="constrained")


def _by_day(summary: CostSummary) -> Figure:
    figure = _figure()
    axes = figure.subplots()
    days = sorted({day for day, _ in summary.by_day_market})
    bottom = [0.0] * len(days)
    positions = list(range(len(days)))
    for market in Market:
        values = [float(summary.by_day_market.get((day, market), Decimal(0))) for day in days]
        axes.bar(positions, values, bottom=bottom, label=market.value, color=COLOURS[market])
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    axes.set_xticks(positions, [day.strftime("%m-%d") for day in days])
    axes.set_title("Spend per day (UTC) by market")
    axes.set_ylabel("USD")
    axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return figure


def _categories(summary: CostSummary) -> Figure:
    figure = _figure()
    axes = figure.subplots()
    names = [c for c in Category if c in summary.by_category]
    shown = summary.category_cents()  # the labels show the report's table's cents
    values = [float(summary.by_category[c]) for c in names]
    bars = axes.barh(
        [f"{c.value}{' (waste)' if c in WASTE else ''}" for c in names],
        values,
        color=[CATEGORY_COLOURS[c] for c in names],
    )
    axes.bar_label(bars, labels=[f"${shown[c.value]:,.2f}" for c in names], padding=3)
    axes.set_title("Where the money went")
    axes.set_xlabel("USD")
    axes.invert_yaxis()
    return figure


def _savings(summary: CostSummary) -> Figure:
    figure = _figure(5.0, 3.0)
    axes = figure.subplots()
    amounts = [summary.on_demand_equivalent_usd, summary.total]
    bars = axes.bar(
        ["on-demand only", "FrameFleet (paid)"],
        [float(v) for v in amounts],
        color=[COLOURS[Market.ON_DEMAND], COLOURS[Market.SPOT]],
    )
    axes.bar_label(bars, labels=[f"${cents(v):,.2f}" for v in amounts])
    axes.set_title(f"Saved ${cents(summary.savings):,.2f}")
    axes.set_ylabel("USD")
    return figure


def _top(summary: CostSummary) -> Figure:
    figure = _figure(7.0, 4.2)
    jobs_axes, teams_axes = figure.subplots(1, 2)
    jobs = sorted(summary.jobs.values(), key=lambda j: j.total, reverse=True)[:TOP]
    jobs_axes.barh([j.job_id[:18] for j in jobs], [float(j.total) for j in jobs], color="#756bb1")
    jobs_axes.set_title(f"Top {TOP} jobs")
    jobs_axes.invert_yaxis()
    teams: dict[str, float] = defaultdict(float)
    for (tag, value), usd in summary.by_tag.items():
        if tag == "team":
            teams[value or "(untagged)"] += float(usd)
    ranked = sorted(teams.items(), key=lambda kv: kv[1], reverse=True)[:TOP]
    teams_axes.barh([name for name, _ in ranked], [usd for _, usd in ranked], color="#636363")
    teams_axes.set_title("Teams")
    teams_axes.invert_yaxis()
    for axes in (jobs_axes, teams_axes):
        axes.set_xlabel("USD")
    return figure


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()
