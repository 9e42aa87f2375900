"""A finance report for one period: its summary, its CSV, its charts and its HTML. Every
table's cents are apportioned from the ledger's full precision (`money.apportion`), so each
table adds up to the report's total to the cent, and so do the CSV and the FOCUS export."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from orchestrator.costs.attribution import WASTE
from orchestrator.costs.money import ZERO, apportion, cents
from orchestrator.costs.outlook import Outlook
from orchestrator.costs.periods import TIME_ZONE, Period
from orchestrator.costs.summary import TAGS, CostSummary


@dataclass
class Report:
    period: Period
    summary: CostSummary
    charts: dict[str, bytes]
    # The previous period, the month to date, its forecast and budget (costs/outlook.py).
    outlook: Outlook | None = None
    line_items: str = ""  # the period's FOCUS rows as CSV, attached to the email

    @property
    def total_cents(self) -> Decimal:
        return cents(self.summary.total)

    def category_cents(self) -> dict[str, Decimal]:
        return self.summary.category_cents()

    def market_day_cents(self) -> dict[str, Decimal]:
        parts = {
            f"{day:%Y-%m-%d} {market.value}": usd
            for (day, market), usd in sorted(self.summary.by_day_market.items())
        }
        return self.summary.shown(parts)

    def csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["section", "item", "usd", "detail"])
        summary = self.summary
        writer.writerow(["total", "total", self.total_cents, f"{self.period.label} ({TIME_ZONE})"])
        for name, usd in self.category_cents().items():
            waste = "waste" if name in {c.value for c in WASTE} else ""
            writer.writerow(["category", name, usd, waste])
        for name, usd in self.market_day_cents().items():
            writer.writerow(["market_day", name, usd, ""])
        for section, parts in (("family", summary.by_family), ("pool", summary.by_pool)):
            for name, usd in summary.shown(parts).items():
                writer.writerow([section, _cell(name), usd, ""])
        for tag in TAGS:
            parts = {value: usd for (kind, value), usd in summary.by_tag.items() if kind == tag}
            for name, usd in apportion(parts).items():
                writer.writerow([f"tag:{tag}", _cell(name or "(untagged)"), usd, ""])
        for model, row in sorted(summary.by_model().items()):
            per_video = "" if row.per_video is None else cents(row.per_video)
            per_hour = "" if row.per_gpu_hour is None else f"{cents(row.per_gpu_hour)}/GPU-hour"
            writer.writerow(
                [
                    "model",
                    _cell(model),
                    cents(row.usd),
                    f"{row.videos} videos;{per_video}/video;"
                    f"{'' if row.per_video_second is None else f'{row.per_video_second:.4f}'}"
                    f"/video-second;{row.gpu_hours:.2f} GPU-hours;{per_hour}",
                ]
            )
        for job in sorted(summary.jobs.values(), key=lambda j: j.total, reverse=True):
            detail = ";".join(f"{c.value}={cents(v)}" for c, v in sorted(job.by_category.items()))
            writer.writerow(["job", _cell(job.job_id), cents(job.total), detail])
        writer.writerow(
            ["savings", "on-demand equivalent", cents(summary.on_demand_equivalent_usd), ""]
        )
        saved = summary.savings
        what = "saved" if saved >= 0 else "extra cost against on-demand"
        writer.writerow(["savings", what, cents(abs(saved)), ""])
        unit = summary.usd_per_video_second()
        per_second = "" if unit is None else cents(unit)
        seconds = f"{summary.video_seconds:.1f} s"
        writer.writerow(["unit", "usd per second of video", per_second, seconds])
        for note in summary.incomplete:
            writer.writerow(["incomplete", "", "", _cell(note)])
        return out.getvalue()

    def subject(self) -> str:
        return f"FrameFleet costs, {self.period.label} ({TIME_ZONE}): ${self.total_cents:,.2f}"


def _cell(text: str) -> str:
    """Outside text in a spreadsheet cell: a leading formula character is made literal."""
    return f"'{text}" if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def waste_share(summary: CostSummary) -> Decimal:
    return summary.waste / summary.total if summary.total > 0 else ZERO


ImageSource = Callable[[str], str]  # a chart's file name -> its src in the HTML


def savings_line(savings: Decimal) -> str:
    """What spot saved, or what it cost beyond on-demand: never "saved $-9.43"."""
    if savings < 0:
        return f"Extra cost against on-demand: ${cents(-savings):,.2f}"
    return f"Saved against on-demand: ${cents(savings):,.2f}"


def outlook_rows(report: Report) -> list[tuple[str, str]]:
    """The period against the one before, the month to date, its forecast and budget."""
    context = report.outlook
    if context is None:
        return []
    change = context.change(report.total_cents)
    rows = [
        (
            f"Previous period ({context.previous.label})",
            f"${context.previous_cents:,.2f}"
            + ("" if change is None else f" (this period {change:+.0%})"),
        ),
        (f"Month to date ({context.month.label})", f"${context.month_to_date_cents:,.2f}"),
        ("Forecast to month end (recent daily rate)", f"${context.forecast_cents:,.2f}"),
    ]
    if context.budget_cents is not None and context.over_budget_cents is not None:
        over = context.over_budget_cents
        verdict = f"over by ${over:,.2f}" if over > 0 else f"under by ${-over:,.2f}"
        rows.append(("Budget for the month", f"${context.budget_cents:,.2f}; forecast {verdict}"))
    return rows
