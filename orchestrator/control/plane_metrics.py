"""The control plane's Prometheus metrics (names after Prometheus's conventions: base units
in the name, `_total` on counters). Gauges are refreshed from the store, the worker registry
and the cost ledger every `every` seconds; counters and histograms move as things happen."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Protocol

from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client import Counter as CounterMetric

from kernel.clock import Clock, sleep_unless_stopped
from kernel.errors import FrameFleetError
from kernel.job_state import JobState
from kernel.outage import Outage
from orchestrator.scheduling.registry import WorkerRegistry

log = logging.getLogger(__name__)

SECONDS_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


class PlaneFacts(Protocol):
    def count_by_state(self) -> dict[JobState, int]: ...

    def oldest_queued_at(self) -> datetime | None: ...

    def deadlines_before(self, moment: datetime) -> list[tuple[str, datetime]]: ...


@dataclass(frozen=True)
class FleetMoney:
    """The ledger's readings: today's spend and what the live fleet costs per hour now."""

    spent_today_usd: Decimal
    usd_per_hour: Decimal


class PlaneMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.jobs = Gauge("framefleet_jobs", "Jobs by state", ["state"], registry=registry)
        self.oldest_queued = Gauge(
            "framefleet_queue_oldest_job_age_seconds",
            "Age of the oldest queued job (0 when none waits)",
            registry=registry,
        )
        self.at_risk = Gauge(
            "framefleet_jobs_at_deadline_risk",
            "Unfinished jobs due within the at-risk window, or overdue",
            registry=registry,
        )
        self.workers = Gauge(
            "framefleet_workers",
            "Workers the control plane knows, by market, instance type and health",
            ["market", "instance_type", "health"],
            registry=registry,
        )
        self.heartbeat_age = Gauge(
            "framefleet_fleet_last_heartbeat_age_seconds",
            "Seconds since the newest heartbeat of any worker (0 with no worker known)",
            registry=registry,
        )
        self.usd_per_hour = Gauge(
            "framefleet_fleet_cost_usd_per_hour",
            "What the live fleet costs per hour now (the ledger's prices)",
            registry=registry,
        )
        self.spent_today = Gauge(
            "framefleet_spend_today_usd", "Spend since midnight UTC (the ledger)", registry=registry
        )
        self.budget_left = Gauge(
            "framefleet_budget_left_today_usd",
            "The daily budget less today's spend",
            registry=registry,
        )
        self.budget_per_day = Gauge(
            "framefleet_budget_per_day_usd", "The daily budget", registry=registry
        )
        self.assignment_latency = Histogram(
            "framefleet_assignment_latency_seconds",
            "From a job entering the queue to its assignment to a GPU",
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        self.dead_letters = Gauge(
            "framefleet_dead_letter_queue_messages",
            "Messages waiting in the dead-letter queue (SQS's approximate count)",
            registry=registry,
        )
        self.gpu_faults = CounterMetric(
            "framefleet_gpu_faults",
            "Jobs stalled on a GPU, and GPUs quarantined (kind: stall | quarantine)",
            ["kind"],
            registry=registry,
        )
        self.checkpoint_write = Histogram(
            "framefleet_checkpoint_write_seconds",
            "Checkpoint writes as workers report them",
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )


@dataclass
class PlaneGauges:
    """Refreshes the gauges; one slow or failing source never stops the others."""

    metrics: PlaneMetrics
    facts: PlaneFacts
    registry: WorkerRegistry
    clock: Clock
    money: Callable[[], FleetMoney] | None = None
    dead_letters: Callable[[], Awaitable[int]] | None = None  # the DLQ's depth
    budget_per_day_usd: float | None = None
    at_risk_within: timedelta = timedelta(minutes=30)
    every: float = 15.0

    def refresh_from_store(self) -> None:
        """The store's and the ledger's readings (blocking I/O: run in a thread)."""
        now = self.clock.now()
        counts = self.facts.count_by_state()
        for state in JobState:
            self.metrics.jobs.labels(state.value).set(counts.get(state, 0))
        oldest = self.facts.oldest_queued_at()
        self.metrics.oldest_queued.set((now - oldest).total_seconds() if oldest else 0.0)
        self.metrics.at_risk.set(len(self.facts.deadlines_before(now + self.at_risk_within)))
        if self.money is not None:
            money = self.money()
            self.metrics.spent_today.set(float(money.spent_today_usd))
            self.metrics.usd_per_hour.set(float(money.usd_per_hour))
            if self.budget_per_day_usd is not None:
                self.metrics.budget_per_day.set(self.budget_per_day_usd)
                left = self.budget_per_day_usd - float(money.spent_today_usd)
                self.metrics.budget_left.set(left)

    def refresh_workers(self) -> None:
        """The worker registry's readings (in the event loop, which owns the registry)."""
        now = self.clock.now()
        seen = self.registry.seen()
        counts = Counter(
            (r.hello.market.value, r.hello.instance_type, r.health.value) for r in seen
        )
        self.metrics.workers.clear()
        for (market, instance_type, health), count in counts.items():
            self.metrics.workers.labels(market, instance_type, health).set(count)
        newest = max((r.last_seen for r in seen), default=None)
        self.metrics.heartbeat_age.set((now - newest).total_seconds() if newest else 0.0)

    async def run(self, stop: asyncio.Event) -> None:
        outage = Outage("the metrics' store or dead-letter queue", log, self.clock)
        while not stop.is_set():
            wait = self.every
            try:
                await asyncio.to_thread(self.refresh_from_store)
                self.refresh_workers()
                if self.dead_letters is not None:
                    self.metrics.dead_letters.set(await self.dead_letters())
                outage.answered()
            except FrameFleetError as error:
                wait = max(wait, outage.failed(error))
            await sleep_unless_stopped(self.clock, stop, wait)
