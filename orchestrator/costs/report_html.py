"""The report as one HTML page (the email's body, and the file kept beside the CSV). Every
piece of outside text (job ids, tags, pool names, notes) is escaped."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from html import escape

from orchestrator.costs.attribution import WASTE
from orchestrator.costs.money import apportion, cents
from orchestrator.costs.periods import TIME_ZONE
from orchestrator.costs.report import (
    ImageSource,
    Report,
    outlook_rows,
    savings_line,
    waste_share,
)
from orchestrator.costs.summary import FLEET, TAGS

TOP_JOBS = 20
STYLE = """
body { font-family: Helvetica, Arial, sans-serif; color: #222; max-width: 860px; margin: 1em auto; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
.period { color: #555; } .incomplete { background: #fff3cd; border: 1px solid #e0c36c;
  padding: 0.6em; margin: 1em 0; }
.headline td { padding: 0.3em 1.2em 0.3em 0; font-size: 1.1em; } .headline b { font-size: 1.3em; }
table.t { border-collapse: collapse; margin: 0.4em 0; } table.t td, table.t th {
  border-bottom: 1px solid #ddd; padding: 0.25em 0.8em; text-align: left; }
table.t td.n, table.t th.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.total td { font-weight: bold; border-top: 2px solid #888; } img { max-width: 100%; }
"""


def render_html(report: Report, image_src: ImageSource) -> str:
    summary = report.summary
    unit = summary.usd_per_video_second()
    extra = summary.savings < 0
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{escape(report.subject())}</title><style>{STYLE}</style></head><body>",
        "<h1>FrameFleet GPU costs</h1>",
        f"<p class='period'>{escape(report.period.label)}, all times {TIME_ZONE}.</p>",
    ]
    if summary.incomplete:
        notes = "".join(f"<li>{escape(n)}</li>" for n in summary.incomplete[:20])
        more = len(summary.incomplete) - 20
        parts.append(
            "<div class='incomplete'><b>Data incomplete:</b> some numbers below may be short."
            f"<ul>{notes}</ul>{f'<p>and {more} more</p>' if more > 0 else ''}</div>"
        )
    parts.append(
        "<table class='headline'><tr>"
        f"<td>Spent<br><b id='total'>${report.total_cents:,.2f}</b></td>"
        f"<td>{'Extra cost' if extra else 'Saved'} vs on-demand<br>"
        f"<b id='saved'>${cents(abs(summary.savings)):,.2f}</b></td>"
        f"<td>Waste<br><b id='waste'>${cents(summary.waste):,.2f}</b> "
        f"({waste_share(summary):.0%})</td>"
        f"<td>Per second of video<br><b>{'n/a' if unit is None else f'${unit:,.4f}'}</b></td>"
        f"</tr></table>"
        f"<p>{summary.instances} instances; {len(summary.jobs)} jobs ran; "
        f"{summary.video_seconds:,.1f} s of video finished.</p>"
    )
    context = outlook_rows(report)
    if context:
        parts.append("<h2>Against the previous period and the budget</h2>")
        rows = "".join(
            f"<tr><td>{escape(what)}</td><td class='n'>{escape(value)}</td></tr>"
            for what, value in context
        )
        parts.append(f"<table class='t' id='outlook'>{rows}</table>")
    parts.append("<h2>Where the money went</h2>")
    parts.append(
        _table(
            ("Category", "USD"),
            report.category_cents().items(),
            report,
            waste={c.value for c in WASTE},
        )
    )
    parts.append(f"<img src='{escape(image_src('where-the-money-went.png'))}' alt='categories'>")
    parts.append("<h2>Spend per day by market</h2>")
    parts.append(f"<img src='{escape(image_src('spend-by-day.png'))}' alt='spend per day'>")
    parts.append(_table(("Day and market", "USD"), report.market_day_cents().items(), report))
    parts.append("<h2>What spot saved</h2>")
    parts.append(
        f"<p>The same fleet hours on on-demand alone, less what only spot causes (lost work and "
        f"checkpoint writes): <b>${cents(summary.on_demand_equivalent_usd):,.2f}</b>. "
        f"Paid: ${report.total_cents:,.2f}. {escape(savings_line(summary.savings))}.</p>"
    )
    parts.append(f"<img src='{escape(image_src('savings.png'))}' alt='savings'>")
    parts.append("<h2>By model: what a video costs</h2>")
    parts.append(_models_table(report))
    parts.append("<h2>By GPU family and pool</h2>")
    parts.append(_table(("GPU family", "USD"), summary.shown(summary.by_family).items(), report))
    parts.append(_table(("Pool", "USD"), summary.shown(summary.by_pool).items(), report))
    parts.append("<h2>By tag</h2>")
    for tag in TAGS:
        values = {
            (v or "(untagged)") if v != FLEET else FLEET: usd
            for (kind, v), usd in summary.by_tag.items()
            if kind == tag
        }
        parts.append(_table((tag.capitalize(), "USD"), apportion(values).items(), None))
    parts.append(f"<img src='{escape(image_src('top-jobs-and-teams.png'))}' alt='top jobs'>")
    parts.append(f"<h2>Top {TOP_JOBS} jobs</h2>")
    parts.append(_jobs_table(report))
    parts.append("</body></html>")
    return "\n".join(parts)


def _table(
    header: tuple[str, str],
    rows: Iterable[tuple[str, Decimal]],
    report: Report | None,
    waste: set[str] | None = None,
) -> str:
    body = []
    for name, usd in rows:
        flag = " (waste)" if waste and name in waste else ""
        body.append(f"<tr><td>{escape(name)}{flag}</td><td class='n'>${usd:,.2f}</td></tr>")
    if report is not None:
        body.append(
            f"<tr class='total'><td>Total</td><td class='n'>${report.total_cents:,.2f}</td></tr>"
        )
    return (
        f"<table class='t'><tr><th>{escape(header[0])}</th><th class='n'>{header[1]}</th>"
        f"</tr>{''.join(body)}</table>"
    )


def _models_table(report: Report) -> str:
    """Each model's spend, finished videos, cost per video, GPU-hours and cost per GPU-hour
    (its jobs' time, waste included; the fleet's idle time is in no model's row)."""
    rows = []
    for model, row in sorted(report.summary.by_model().items()):
        video = "n/a" if row.per_video is None else f"${cents(row.per_video):,.2f}"
        second = "n/a" if row.per_video_second is None else f"${row.per_video_second:,.4f}"
        hour = "n/a" if row.per_gpu_hour is None else f"${cents(row.per_gpu_hour):,.2f}"
        rows.append(
            f"<tr><td>{escape(model)}</td><td class='n'>${cents(row.usd):,.2f}</td>"
            f"<td class='n'>{row.videos}</td><td class='n'>{video}</td>"
            f"<td class='n'>{second}</td>"
            f"<td class='n'>{row.gpu_hours:,.2f}</td><td class='n'>{hour}</td></tr>"
        )
    return (
        "<table class='t' id='by-model'><tr><th>Model</th><th class='n'>USD</th>"
        "<th class='n'>Videos</th><th class='n'>Per video</th>"
        "<th class='n'>Per finished video-second</th><th class='n'>GPU-hours</th>"
        f"<th class='n'>Per GPU-hour</th></tr>{''.join(rows)}</table>"
    )


def _jobs_table(report: Report) -> str:
    jobs = sorted(report.summary.jobs.values(), key=lambda j: j.total, reverse=True)[:TOP_JOBS]
    rows = "".join(
        f"<tr><td>{escape(j.job_id)}</td><td>{escape(j.team or '-')}</td>"
        f"<td class='n'>${cents(j.total):,.2f}</td><td class='n'>${cents(j.waste):,.2f}</td>"
        f"<td class='n'>{j.video_seconds:.1f}</td></tr>"
        for j in jobs
    )
    return (
        "<table class='t'><tr><th>Job</th><th>Team</th><th class='n'>USD</th>"
        f"<th class='n'>Waste</th><th class='n'>Video s</th></tr>{rows}</table>"
    )
