"""The demo's finance email: the product's own ledger and report, in the replayed market's
time. The demo runs the trace `speed` times faster than the wall clock, so the store's facts
(wall-clock instance lives, attempts and price readings) are seen through the replay clock:
every moment mapped to the trace's moment and every duration stretched by `speed`. What the
ledger then bills is what the replayed hours would have cost; the email goes through SES
(moto) and is kept as an .eml file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import boto3

from kernel.clock import FakeClock, ReplayClock
from orchestrator.aws.ses import SesSender
from orchestrator.costs.ledger import CostLedger
from orchestrator.costs.mail import report_email
from orchestrator.costs.report import Period, Report
from orchestrator.costs.reporting import Reporter, ReportSettings
from orchestrator.store.cost_facts import AttemptSpan, InstanceLife, PoolKey
from orchestrator.store.job_store import JobStore

SENDER = "costs@framefleet.demo"
FINANCE = "finance@framefleet.demo"


class ReplayedFacts:
    """The store's cost facts in the replay's time (the ledger's `CostFacts` port)."""

    def __init__(self, store: JobStore, replay: ReplayClock) -> None:
        self._store, self._replay = store, replay

    def _wall(self, trace_moment: datetime) -> datetime:
        return self._replay.epoch + (trace_moment - self._replay.trace_start) / self._replay.speed

    def _trace(self, wall: datetime | None) -> datetime | None:
        return None if wall is None else self._replay.trace_time(wall)

    def instance_lives(self, since: datetime, until: datetime) -> list[InstanceLife]:
        lives = self._store.instance_lives(self._wall(since), self._wall(until))
        return [
            replace(
                life,
                launched_at=self._replay.trace_time(life.launched_at),
                ready_at=self._trace(life.ready_at),
                draining_at=self._trace(life.draining_at),
                ended_at=self._trace(life.ended_at),
            )
            for life in lives
        ]

    def price_changes(
        self, pools: Sequence[PoolKey], until: datetime
    ) -> dict[PoolKey, list[tuple[datetime, Decimal]]]:
        history = self._store.price_changes(pools, self._wall(until))
        return {
            pool: [(self._replay.trace_time(at), price) for at, price in changes]
            for pool, changes in history.items()
        }

    def attempts_on(self, instance_ids: Sequence[str]) -> list[AttemptSpan]:
        speed = self._replay.speed
        return [
            replace(
                span,
                started_at=self._replay.trace_time(span.started_at),
                ended_at=self._trace(span.ended_at),
                checkpointed_at=self._trace(span.checkpointed_at),
                model_load_seconds=span.model_load_seconds * speed,
                checkpoint_seconds=span.checkpoint_seconds * speed,
            )
            for span in self._store.attempts_on(instance_ids)
        ]


def finance_report(
    store: JobStore,
    replay: ReplayClock,
    started: datetime,
    ended: datetime,
    endpoint: str,
    region: str,
    folder: Path,
) -> tuple[Report, Path]:
    """Builds, keeps and emails the report of the demo's run, from `started` to `ended` (wall
    moments); returns it and the .eml file."""
    end = FakeClock(replay.trace_time(ended))  # live instances are billed up to the end
    ledger = CostLedger(ReplayedFacts(store, replay), end)
    settings = ReportSettings((FINANCE,), SENDER, folder)
    reporter = Reporter(ledger, store, None, settings, end)
    report = reporter.build(Period("custom", replay.trace_time(started), end.now()))
    reporter.write(report)
    message = report_email(report, SENDER, [FINANCE])
    raw = message.as_bytes()
    ses = boto3.client("ses", region_name=region, endpoint_url=endpoint)
    ses.verify_email_identity(EmailAddress=SENDER)
    SesSender(ses).send_raw(raw, SENDER, [FINANCE])
    eml = folder / "finance-report.eml"
    eml.write_bytes(raw)
    return report, eml
