"""The demo's closing tables: its timeline, each resumed job's video against an uninterrupted
render of the same spec, and the summary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.table import Table

from framefleet.demo_outputs import ResumeCheck
from framefleet.demo_report import Interruptions, Verdict, seconds_since, timeline_rows
from kernel.job_record import JobEvent
from orchestrator.costs.money import cents, usd
from orchestrator.costs.summary import CostSummary


def resume_table(checks: Sequence[ResumeCheck]) -> Table:
    table = Table(title="resumed jobs against an uninterrupted render of the same spec")
    for column in ("job", "MP4 sha256 (resumed)", "uninterrupted", "identical"):
        table.add_column(column)
    for check in checks:
        same = "[green]yes, bit for bit[/]" if check.identical else "[red]NO[/]"
        reference = (check.reference_sha256 or "failed")[:16]
        table.add_row(check.job_id, check.resumed_sha256[:16], reference, same)
    return table


def timeline_table(
    timeline: list[dict[str, Any]], histories: dict[str, list[JobEvent]], started: datetime
) -> Table:
    table = Table(title="timeline")
    for column in ("at", "what", "instance / job", "detail"):
        table.add_column(column, overflow="fold")
    for row in timeline_rows(timeline, histories):
        table.add_row(seconds_since(started, row.at), row.what, row.subject, row.detail)
    return table


@dataclass(frozen=True)
class RunFacts:
    """What the summary says about a run, gathered at its end."""

    verdict: Verdict
    interrupted: Interruptions
    cost: CostSummary
    videos: int
    checks: Sequence[ResumeCheck]
    resumed_from_checkpoint: int  # jobs that went on from a checkpoint on another instance
    dead_letters: Sequence[str]
    held_seconds: float  # the market stood still this long while the fleet booted

    @property
    def ok(self) -> bool:
        return self.verdict.ok and not self.story_missing

    @property
    def story_missing(self) -> list[str]:
        """What the demo exists to show and this run did not: a spot notice on an instance
        running a job, that job going on elsewhere from its checkpoint, and the video the
        same, bit for bit, as an uninterrupted render."""
        missing = []
        if self.interrupted.noticed_busy == 0:
            missing.append("no spot notice reached an instance running a job")
        if not self.checks:
            missing.append("no job went on elsewhere from its checkpoint")
        elif not all(check.identical for check in self.checks):
            missing.append("a resumed video differs from its uninterrupted render")
        return missing


def summary_table(facts: RunFacts) -> Table:
    verdict, cut, cost = facts.verdict, facts.interrupted, facts.cost
    equivalent = cost.on_demand_equivalent_usd
    met = verdict.with_deadline - len(verdict.late)
    identical = sum(1 for check in facts.checks if check.identical)
    extra = cost.savings < 0
    rows = [
        ("jobs succeeded", str(len(verdict.succeeded))),
        ("jobs failed", str(len(verdict.failed))),
        ("jobs unfinished at the timeout", str(len(verdict.unfinished))),
        ("jobs lost (sent, not in the store)", str(len(verdict.lost))),
        ("jobs finished twice", str(len(verdict.duplicated))),
        ("deadlines met", f"{met} of the {verdict.with_deadline} jobs that had one"),
        (
            "spot interruptions",
            f"{cut.total}: {cut.noticed} with notice ({cut.noticed_busy} on a running job), "
            f"{cut.silent} without ({cut.silent_busy} on a running job)",
        ),
        ("jobs resumed elsewhere from a checkpoint", str(facts.resumed_from_checkpoint)),
        (
            "resumed videos against an uninterrupted render",
            f"{identical} of {len(facts.checks)} identical, bit for bit",
        ),
        ("malformed messages dead-lettered", _reasons(facts.dead_letters)),
        ("videos in demo-output/ (random weights: noise)", str(facts.videos)),
        (
            "market held for the fleet (booting, starting, no spot work)",
            f"{facts.held_seconds:.0f} s of wall time",
        ),
        (
            "cost (the ledger: the instances' wall-clock hours at the trace's prices)",
            f"{usd(cost.total)} for {cost.instances} instances",
        ),
        ("of which waste (lost, idle, draining)", usd(cost.waste)),
        ("the same work on on-demand only", usd(equivalent)),
        (
            "extra cost against on-demand only" if extra else "saved against on-demand only",
            usd(abs(cost.savings)) + (f" ({cost.savings / equivalent:.0%})" if equivalent else ""),
        ),
    ]
    rows += [("[red]missing from the story[/]", why) for why in facts.story_missing]
    table = Table(title="summary: " + ("[green]OK[/]" if facts.ok else "[red]FAILED[/]"))
    table.add_column("what")
    table.add_column("value")
    for what, value in rows:
        table.add_row(what, value)
    return table


def _reasons(reasons: Sequence[str]) -> str:
    counted = Counter(reasons)
    listed = ", ".join(f"{reason} x{n}" if n > 1 else reason for reason, n in counted.items())
    return f"{len(reasons)} ({listed})" if reasons else "0"


def summary_facts(facts: RunFacts, videos: Mapping[str, Path], eml: Path) -> dict[str, Any]:
    """summary.json: what a test or a script reads back from a run."""
    verdict, cut, cost = facts.verdict, facts.interrupted, facts.cost
    return {
        "ok": facts.ok,
        "story_missing": facts.story_missing,
        "succeeded": verdict.succeeded,
        "failed": verdict.failed,
        "unfinished": verdict.unfinished,
        "lost": verdict.lost,
        "duplicated": verdict.duplicated,
        "late": verdict.late,
        "with_deadline": verdict.with_deadline,
        "interruptions_with_notice": cut.noticed,
        "interruptions_without_notice": cut.silent,
        "noticed_on_running_jobs": cut.noticed_busy,
        "resumed_from_checkpoint": facts.resumed_from_checkpoint,
        "resumed_identical": {c.job_id: c.identical for c in facts.checks},
        "videos": sorted(str(path) for path in videos.values()),
        "dead_lettered": list(facts.dead_letters),
        "market_held_seconds": round(facts.held_seconds, 1),
        "cost_usd": float(cents(cost.total)),
        "on_demand_only_usd": float(cents(cost.on_demand_equivalent_usd)),
        "waste_usd": float(cents(cost.waste)),
        "finance_email": str(eml),
    }
