"""Tables and a chart for the simulator's results (rich, matplotlib)."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from simulator.results import FleetResult
from simulator.study import PolicySummary
from simulator.targets import Target


def policy_table(title: str, *columns: str) -> Table:
    """A table with the policy's name left and its figures right."""
    table = Table(title=title)
    for column in ("policy", *columns):
        table.add_column(column, justify="left" if column == "policy" else "right")
    return table


def study_table(title: str, summaries: list[PolicySummary]) -> Table:
    table = policy_table(
        title,
        "runs",
        "mean cost",
        "vs on-demand",
        "gap to optimum",
        "on-demand h",
        "spot h",
        "misses",
    )
    for s in summaries:
        table.add_row(
            s.policy,
            str(s.runs),
            f"${s.mean_cost:.2f}",
            f"{s.cost_vs_on_demand:.1%}",
            f"{s.gap_to_optimum:+.1%}",
            f"{s.on_demand_hours:.1f}",
            f"{s.spot_hours:.1f}",
            str(s.misses),
        )
    return table


def fleet_table(title: str, results: list[FleetResult]) -> Table:
    on_demand = next((r.cost for r in results if r.policy == "on-demand only"), None)
    table = policy_table(
        title,
        "total cost",
        "below on-demand",
        "on-demand h",
        "spot h",
        "deadline misses",
        "unfinished",
        "interruptions",
        "launches",
        "to start p50/p95 (min)",
    )
    for r in results:
        saving = f"{1 - r.cost / on_demand:.1%}" if on_demand else "-"
        table.add_row(
            r.policy,
            f"${r.cost:,.2f}",
            saving,
            f"{r.on_demand_hours:,.1f}",
            f"{r.spot_hours:,.1f}",
            str(r.misses),
            str(r.unfinished),
            str(r.interruptions),
            str(r.launches),
            f"{r.start_delay_p50_hours * 60:.1f} / {r.start_delay_p95_hours * 60:.1f}",
        )
    return table


def target_table(targets: list[Target]) -> Table:
    table = Table(title="targets (issues 16 and 32)")
    for column in ("setting", "target", "measured", "status"):
        table.add_column(column, overflow="fold")
    for t in targets:
        status = "met" if t.met else f"missed, short by {t.short_by}"
        table.add_row(t.setting, t.goal, t.measured, status)
    return table


def chart(
    studies: dict[str, list[PolicySummary]], fleet: list[FleetResult] | None, path: Path
) -> Path:
    # Imported here: matplotlib takes half a second, which every `framefleet` command would pay.
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    panels = len(studies) + (1 if fleet else 0)
    figure, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4.2), squeeze=False)
    for axis, (title, summaries) in zip(axes[0], studies.items(), strict=False):
        names = [s.policy for s in summaries]
        axis.barh(names, [s.mean_cost for s in summaries], color="#4c72b0")
        axis.set_title(title, fontsize=9)
        axis.set_xlabel("mean cost per job (USD)")
        axis.invert_yaxis()
    if fleet:
        axis = axes[0][-1]
        names = [r.policy for r in fleet]
        axis.barh(names, [r.cost for r in fleet], color="#dd8452")
        axis.set_title("fleet setting: total cost", fontsize=9)
        axis.set_xlabel("USD")
        axis.invert_yaxis()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
