"""`framefleet autoscaler plan|run`: the decisions for a state, with their reasons; the loop.

`plan --trace DIR --at TIME --jobs FILE` replays a spot-market trace (real prices and
availability) at one moment; without `--trace` it reads the live market (EC2 at the configured
endpoint), the control plane's queue and the fleet's instances.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aioboto3
from aiobotocore.config import AioConfig
from prometheus_client import CollectorRegistry
from rich.console import Console
from rich.table import Table

from autoscaler.actuation import Actuator
from autoscaler.credentials.dynsec import DynsecAccounts
from autoscaler.credentials.issuer import WorkerCredentials
from autoscaler.credentials.ssm import SsmCredentialDrop
from autoscaler.deadline import choose_market
from autoscaler.demand import StoreDemand, demand_of
from autoscaler.ec2.adapter import Ec2FleetAdapter
from autoscaler.ec2.ports import Ec2Fleet
from autoscaler.fleet_record import FleetRecorder
from autoscaler.loop import AutoscalerLoop
from autoscaler.market.advisor import SpotAdvisor
from autoscaler.market.aws_quotas import ServiceQuotasReader
from autoscaler.market.capacity import CapacityMemory
from autoscaler.market.limits import AccountLimits
from autoscaler.market.live import LiveMarket
from autoscaler.market.ports import MarketData
from autoscaler.market.replay import ReplayedMarket, TraceCapacityGate
from autoscaler.market.trace import TraceMarket, load_trace
from autoscaler.metrics import AutoscalerMetrics
from autoscaler.planned_market import PlannedMarketRule, SpotHistory
from autoscaler.policy import plan
from autoscaler.pools import Pool
from autoscaler.reconcile import Reconciler
from autoscaler.snapshot import InstanceView, JobDemand, Plan, PlanInput, PurchaseSettings
from autoscaler.throughput import ThroughputModel, step_time_prior
from autoscaler.wait_notes import WaitNotes
from framefleet.control_plane import build_store
from framefleet.health_server import HealthServer
from framefleet.heap import settle_heap
from framefleet.instance_catalogue import learn_candidate_types
from framefleet.outage_report import report_outages
from framefleet.settings import AutoscalerConfig, Settings
from kernel.clock import Clock, FakeClock, SystemClock, stop_on_signals
from kernel.errors import ConfigurationError, JobValidationError
from kernel.job_spec import parse_job
from kernel.market import Market
from kernel.step_time import KNOWN_MODELS, Architecture
from orchestrator.control.leadership import Leadership
from orchestrator.costs.fleet_record import StoreFleetRecord
from orchestrator.costs.ledger import CostLedger
from orchestrator.store.job_store import JobStore


def add_commands(commands: Any) -> None:
    autoscaler = commands.add_parser("autoscaler", help="capacity planning and purchasing")
    actions = autoscaler.add_subparsers(dest="action", required=True)
    planning = actions.add_parser("plan", help="print the decisions and their reasons")
    planning.add_argument("--trace", type=Path, help="spot trace folder (else the live market)")
    planning.add_argument("--at", help="moment to plan at, ISO 8601 (trace mode)")
    planning.add_argument("--jobs", type=Path, help="JSON list of jobs (else the live queue)")
    planning.add_argument("--instances", type=Path, help="JSON list of running instances")
    planning.add_argument("--spent-today", type=float, default=0.0, help="USD spent today")
    planning.add_argument("--budget-per-hour", type=float)
    planning.add_argument("--budget-per-day", type=float)
    actions.add_parser("run", help="run the autoscaler loop against EC2")


def throughput_model(config: AutoscalerConfig) -> ThroughputModel:
    """The step-time model, with the configured models' sizes beside the built-in ones."""
    configured = {
        name: Architecture(m.parameters, m.layers, m.width) for name, m in config.models.items()
    }
    return ThroughputModel(step_time_prior({**KNOWN_MODELS, **configured}))


def purchase_settings(config: AutoscalerConfig) -> PurchaseSettings:
    return PurchaseSettings(
        candidate_types=tuple(config.candidate_types),
        budget_per_hour=config.budget_per_hour,
        budget_per_day=config.budget_per_day,
        idle_timeout=timedelta(seconds=config.idle_timeout_seconds),
        warm_minimum=config.warm_minimum,
        reaction_seconds=config.interval_seconds,
        boot_seconds=config.boot_seconds,
        model_load_seconds=config.model_load_seconds,
        prewarm_wait_value_per_job_hour=config.prewarm_wait_value_per_job_hour,
        return_to_spot=config.return_to_spot,
        return_to_spot_margin_hours=config.return_to_spot_margin_hours,
        checkpoint_interval_seconds=config.checkpoint_interval_seconds,
        split_renders=config.split_renders,
    )


def load_jobs(path: Path, now: datetime) -> list[JobDemand]:
    """Job specs (framefleet.job/v1); beside the spec fields an entry may carry `steps_done`,
    `submitted_hours_ago` and `deadline_in_hours` (relative to the planning moment)."""
    try:
        entries = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ConfigurationError(f"cannot read jobs file {path}: {error}") from None
    if not isinstance(entries, list):
        raise ConfigurationError(f"{path}: expected a JSON list of jobs")
    jobs = []
    for entry in entries:
        body = dict(entry)
        done = int(body.pop("steps_done", 0))
        submitted = now - timedelta(hours=float(body.pop("submitted_hours_ago", 0)))
        if "deadline_in_hours" in body:
            deadline = now + timedelta(hours=float(body.pop("deadline_in_hours")))
            body["deadline"] = deadline.isoformat()
        body.setdefault("schema", "framefleet.job/v1")
        try:
            spec = parse_job(body, now=None)
        except JobValidationError as error:
            raise ConfigurationError(f"{path}: job {body.get('job_id')}: {error}") from None
        jobs.append(demand_of(spec, submitted, spec.deadline, done))
    return jobs


def load_instances(path: Path | None, now: datetime) -> list[InstanceView]:
    if path is None:
        return []
    views = []
    for item in json.loads(path.read_text()):
        pool = Pool(item["instance_type"], item["availability_zone"], Market(item["market"]))
        busy = int(item.get("busy_gpus", 0))
        idle = timedelta(minutes=float(item.get("idle_minutes", 0)))
        views.append(
            InstanceView(
                item["instance_id"],
                pool,
                float(item["price_per_hour"]),
                now - timedelta(hours=float(item.get("hours_up", 1))),
                int(item.get("gpus", 1)),
                busy_gpus=busy,
                idle_since=None if busy else now - idle,
                unsaved_work=busy > 0,
            )
        )
    return views


def plan_table(decided: Plan, state: PlanInput) -> Table:
    table = Table(title=f"autoscaler plan at {state.now:%Y-%m-%d %H:%M} UTC", show_lines=True)
    table.add_column("decision")
    table.add_column("what")
    table.add_column("why", overflow="fold", max_width=90)
    for launch in decided.launches:
        table.add_row("launch", f"{launch.pool}\n${launch.price_per_hour:.3f}/h", launch.reason)
    for job_id, instance_id in decided.placed:
        table.add_row("place", f"{job_id} -> {instance_id}", "a free GPU that fits is there")
    for wait in decided.waits:
        table.add_row("wait", wait.job_id, wait.reason)
    for termination in decided.terminations:
        table.add_row("terminate", termination.instance_id, termination.reason)
    return table


async def _plan_from_trace(
    args: argparse.Namespace, config: AutoscalerConfig
) -> tuple[Plan, PlanInput]:
    trace = load_trace(args.trace)
    at = datetime.fromisoformat(args.at) if args.at else trace.start + timedelta(days=1)
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    clock = FakeClock(at)
    market = TraceMarket(trace, clock)
    types = tuple(sorted({z.instance_type for z in trace.zones.values()}))
    settings = _with_budget(replace(purchase_settings(config), candidate_types=types), args)
    if args.jobs is None:
        raise ConfigurationError("--jobs FILE is needed with --trace")
    state = PlanInput(
        at,
        tuple(load_jobs(args.jobs, at)),
        tuple(load_instances(args.instances, at)),
        await market.snapshot(market.pools()),
        spent_today=args.spent_today,
    )
    return plan(state, settings, throughput_model(config)), state


def _with_budget(settings: PurchaseSettings, args: argparse.Namespace) -> PurchaseSettings:
    if args.budget_per_hour is not None:
        settings = replace(settings, budget_per_hour=args.budget_per_hour)
    if args.budget_per_day is not None:
        settings = replace(settings, budget_per_day=args.budget_per_day)
    return settings


# One quick try a read: a quota not read this hour is read the next (the limits EC2 answers a
# launch with still hold), and a slow Service Quotas must never hold up a round's buying.
QUOTA_READS = AioConfig(retries={"max_attempts": 1}, connect_timeout=5, read_timeout=5)


@dataclass
class LiveAutoscaler:
    loop: AutoscalerLoop
    store: JobStore
    health: HealthServer | None = None


@asynccontextmanager
async def live_autoscaler(settings: Settings, clock: Clock) -> AsyncIterator[LiveAutoscaler]:
    config = settings.autoscaler
    session = aioboto3.Session(region_name=settings.region)
    store = build_store(settings, clock)  # the same store, migrated the same way, as serve
    async with (
        session.client("ec2", endpoint_url=settings.endpoint_url) as ec2,
        session.client(
            "pricing", region_name="us-east-1", endpoint_url=settings.endpoint_url
        ) as pricing,
        session.client("ssm", endpoint_url=settings.endpoint_url) as ssm,
        session.client("sts", endpoint_url=settings.endpoint_url) as sts,
        session.client(
            "service-quotas", endpoint_url=settings.endpoint_url, config=QUOTA_READS
        ) as quotas,
    ):
        await learn_candidate_types(ec2, store.instance_kinds, config.candidate_types)
        capacity = CapacityMemory(clock, log=store.pool_marks)  # shared by the autoscaler replicas
        limits = AccountLimits(clock, ServiceQuotasReader(quotas))
        adapter = Ec2FleetAdapter(
            ec2,
            config.launch_template,
            config.use_create_fleet,
            config.subnets,
            config.launch_templates,
        )
        if config.image_id:
            await adapter.ensure_launch_template(config.image_id)
        market: MarketData
        fleet: Ec2Fleet = adapter
        if settings.replay is not None:
            # The trace's prices and spot capacity, in compressed time, in front of EC2.
            replay = settings.replay.clock()
            recorded = TraceMarket(load_trace(settings.replay.trace), replay)
            market = ReplayedMarket(recorded, replay, clock)
            fleet = TraceCapacityGate(adapter, recorded, replay)
        else:
            advisor = await asyncio.to_thread(SpotAdvisor.fetch_or_shipped, config.advisor_url)
            market = LiveMarket(ec2, pricing, advisor, capacity, clock)
        registry = CollectorRegistry()
        history = SpotHistory.for_interval(config.interval_seconds)
        loop = AutoscalerLoop(
            market=market,
            actuator=Actuator(fleet, capacity, config.fleet_id, clock, limits),
            reconciler=Reconciler(fleet, config.fleet_id, clock),
            demand=StoreDemand(store),
            capacity=capacity,
            model=throughput_model(config),
            settings=purchase_settings(config),
            zones=config.zones,
            clock=clock,
            interval_seconds=config.interval_seconds,
            recorder=FleetRecorder(
                StoreFleetRecord(
                    store.cost_facts, CostLedger(store.cost_facts, clock, settings.costs.ledger())
                )
            ),
            metrics=AutoscalerMetrics(registry),
            spot_history=history,
            wait_notes=WaitNotes(store.wait_notes),
            market_rule=PlannedMarketRule(history) if config.spot_planner else choose_market,
        )
        admin = config.broker_admin
        if admin is not None:
            loop.credentials = WorkerCredentials(
                DynsecAccounts(admin.link()),
                SsmCredentialDrop(ssm, sts, config.worker_credentials_path),
                clock,
                control_plane_password=(
                    admin.control_plane_password.get_secret_value()
                    if admin.control_plane_password
                    else None
                ),
            )
        health = None
        if config.metrics_port is not None:

            async def store_answers() -> None:
                await asyncio.to_thread(store.count_jobs)

            async def ec2_answers() -> None:
                await adapter.describe(config.fleet_id)

            health = HealthServer(
                registry,
                {
                    "store": store_answers,
                    "ec2": ec2_answers,
                    "dependencies": report_outages(registry),
                },
                settings.metrics_host,
                config.metrics_port,
            )
        try:
            yield LiveAutoscaler(loop, store, health)
        finally:
            store.dispose()


async def _plan_live(args: argparse.Namespace, settings: Settings) -> tuple[Plan, PlanInput]:
    async with live_autoscaler(settings, SystemClock()) as live:
        loop = live.loop
        loop.settings = _with_budget(loop.settings, args)
        now = loop.clock.now()
        busy = await asyncio.to_thread(loop.demand.busy_gpus)
        await loop.reconciler.sync()  # what exists; `plan` terminates nothing
        jobs = load_jobs(args.jobs, now) if args.jobs else loop.demand.queued(now)
        state = await loop.plan_input(busy, jobs, spent_today=args.spent_today)
        return plan(state, loop.settings, loop.model), state


def buying_lease(live: LiveAutoscaler, settings: Settings, clock: Clock) -> Leadership:
    """One replica buys at a time: the holder of the autoscaler's lease."""
    holder = settings.control.replica_id or f"ff-as-{uuid.uuid4().hex[:12]}"
    ttl = timedelta(seconds=settings.control.lease_seconds)
    return Leadership(live.store.leases, clock, "autoscaler", holder, ttl=ttl)


async def _run(settings: Settings) -> None:
    stop = stop_on_signals()
    clock = SystemClock()
    async with live_autoscaler(settings, clock) as live:
        lease = buying_lease(live, settings, clock)
        settle_heap()
        if live.health is not None:
            await live.health.start()
        try:
            await asyncio.gather(lease.run(stop), live.loop.run(stop, lease.leading))
        finally:
            if live.health is not None:
                await live.health.stop()


def run_command(args: argparse.Namespace, settings: Settings, console: Console) -> None:
    if args.action == "run":
        asyncio.run(_run(settings))
        return
    if args.trace is not None:
        decided, state = asyncio.run(_plan_from_trace(args, settings.autoscaler))
    else:
        decided, state = asyncio.run(_plan_live(args, settings))
    console.print(plan_table(decided, state))
    markets = decided.markets()
    hourly = sum(launch.price_per_hour for launch in decided.launches)
    console.print(
        f"{len(state.queued)} queued jobs: {markets[Market.SPOT]} spot and "
        f"{markets[Market.ON_DEMAND]} on-demand launches (+${hourly:.2f}/h), "
        f"{len(decided.placed)} placed on free GPUs, {len(decided.waits)} waiting, "
        f"{len(decided.terminations)} terminations"
    )
