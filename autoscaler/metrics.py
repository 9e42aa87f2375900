"""The autoscaler's Prometheus metrics: what it bought, where capacity ran out, which pools
interrupted, the fleet it sees and the budget it plans against."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client import Counter as PromCounter

from autoscaler.actuation import Actuation
from autoscaler.ec2.ports import CapacityUnavailable, LimitReached
from autoscaler.instances import InstanceRecord
from autoscaler.market.limits import QuotaUse
from autoscaler.pools import Pool
from autoscaler.snapshot import Plan, PlanInput, PurchaseSettings


class AutoscalerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        pool = ["instance_type", "availability_zone"]
        self.rounds = PromCounter(
            "framefleet_autoscaler_rounds", "Planning rounds", registry=registry
        )
        self.launches = PromCounter(
            "framefleet_autoscaler_launches",
            "Instances launched, by pool and market",
            [*pool, "market"],
            registry=registry,
        )
        self.capacity_errors = PromCounter(
            "framefleet_autoscaler_capacity_errors",
            "Launches EC2 refused for lack of capacity, by pool and market",
            [*pool, "market"],
            registry=registry,
        )
        self.limit_errors = PromCounter(
            "framefleet_autoscaler_limit_errors",
            "Launches an account limit refused (a vCPU quota, the spot count, a subnet's "
            "addresses), by pool and market",
            [*pool, "market"],
            registry=registry,
        )
        self.launch_errors = PromCounter(
            "framefleet_autoscaler_launch_errors",
            "Launches that failed with another error (EC2 unreachable, a permission), by pool "
            "and market",
            [*pool, "market"],
            registry=registry,
        )
        quota = ["quota_code", "quota_name"]
        self.quota_vcpus = Gauge(
            "framefleet_autoscaler_quota_vcpus",
            "The account's vCPU quota, as Service Quotas reads it (absent: not read)",
            quota,
            registry=registry,
        )
        self.quota_used_vcpus = Gauge(
            "framefleet_autoscaler_quota_used_vcpus",
            "vCPUs of this fleet's live instances under each quota",
            quota,
            registry=registry,
        )
        self.beyond_limits = Gauge(
            "framefleet_autoscaler_jobs_beyond_limits",
            "Queued jobs the last plan left waiting for an account limit, by that limit (a "
            "quota by its name and code, a subnet)",
            ["limit"],
            registry=registry,
        )
        self.interruptions = PromCounter(
            "framefleet_interruptions",
            "Spot instances reclaimed by AWS, by pool",
            pool,
            registry=registry,
        )
        self.instances = Gauge(
            "framefleet_autoscaler_instances",
            "Instances of the fleet, by market, type and state",
            ["market", "instance_type", "state"],
            registry=registry,
        )
        self.waiting = Gauge(
            "framefleet_autoscaler_jobs_waiting",
            "Queued jobs the last plan could not serve yet",
            registry=registry,
        )
        self.spent_today = Gauge(
            "framefleet_autoscaler_spend_today_usd",
            "Today's spend the budget counts (the ledger's)",
            registry=registry,
        )
        self.budget_left = Gauge(
            "framefleet_autoscaler_budget_left_today_usd",
            "The daily budget less today's spend",
            registry=registry,
        )
        self.usd_per_hour = Gauge(
            "framefleet_autoscaler_fleet_usd_per_hour",
            "The planned fleet's price per hour",
            registry=registry,
        )

    def planned(
        self, state: PlanInput, decided: Plan, done: Actuation, settings: PurchaseSettings
    ) -> None:
        self.rounds.inc()
        for launch, _ in done.launched:
            self.launches.labels(*_labels(launch.pool), launch.pool.market.value).inc()
        for launch, error in done.failed:
            counter = (
                self.capacity_errors
                if isinstance(error, CapacityUnavailable)
                else self.limit_errors
                if isinstance(error, LimitReached)
                else self.launch_errors
            )
            counter.labels(*_labels(launch.pool), launch.pool.market.value).inc()
        self.waiting.set(len(decided.waits))
        self.beyond_limits.clear()
        for limit, count in Counter(w.limit for w in decided.waits if w.limit).items():
            self.beyond_limits.labels(limit).set(count)
        self.spent_today.set(state.spent_today)
        self.budget_left.set(settings.budget_per_day - state.spent_today)
        self.usd_per_hour.set(sum(i.price_per_hour for i in state.instances))

    def quotas(self, uses: Iterable[QuotaUse]) -> None:
        for use in uses:
            labels = (use.quota.code, use.quota.name)
            self.quota_used_vcpus.labels(*labels).set(use.used)
            if use.vcpus is not None:
                self.quota_vcpus.labels(*labels).set(use.vcpus)

    def interrupted(self, pool: Pool) -> None:
        self.interruptions.labels(*_labels(pool)).inc()

    def fleet(self, records: Iterable[InstanceRecord]) -> None:
        counts = Counter(
            (r.pool.market.value, r.pool.instance_type, r.state.value) for r in records
        )
        self.instances.clear()
        for (market, instance_type, state), count in counts.items():
            self.instances.labels(market, instance_type, state).set(count)


def _labels(pool: Pool) -> tuple[str, str]:
    return pool.instance_type, pool.availability_zone
