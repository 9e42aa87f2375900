"""`framefleet fleet local`: run the fleet's EC2 instances as worker processes on this machine
(framefleet/local_fleet.py), and with a trace replay in the settings, the spot market's
interruptions too (framefleet/spot_replay.py)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

import aioboto3

from autoscaler.ec2.adapter import Ec2FleetAdapter
from autoscaler.market.trace import load_trace
from framefleet.control_plane import build_store
from framefleet.instance_boot import InstanceBoot, ec2_user_data
from framefleet.local_fleet import LocalFleet, LocalFleetSettings, Timeline
from framefleet.settings import Settings
from framefleet.spot_replay import EventBridgeEvents, ReplaySettings, SpotReplay
from kernel.clock import SystemClock, stop_on_signals
from kernel.errors import ConfigurationError
from orchestrator.store.job_store import JobStore


class StoreBusyInstances:
    """BusyInstances from the store: an attempt on the instance that has not ended."""

    def __init__(self, store: JobStore) -> None:
        self._store = store

    def running_a_job(self, instance_id: str) -> bool:
        return any(
            span.ended_at is None for span in self._store.cost_facts.attempts_on([instance_id])
        )


def add_commands(commands: Any) -> None:
    fleet = commands.add_parser("fleet", help="run the fleet's instances as local workers")
    actions = fleet.add_subparsers(dest="action", required=True)
    local = actions.add_parser("local", help="one worker process per EC2 instance of the fleet")
    local.add_argument("--workdir", type=Path, default=Path(".fleet"))
    local.add_argument("--worker-config", type=Path, help="worker TOML for every worker")
    local.add_argument("--timeline", type=Path, help="JSON lines file (default WORKDIR/timeline)")
    local.add_argument("--min-notice-seconds", type=float, default=4.0)
    local.add_argument(
        "--silent-every",
        type=int,
        default=3,
        help="every Nth interruption comes without notice (0: never)",
    )
    local.add_argument("--poll-seconds", type=float, default=0.5)
    local.add_argument(
        "--user-data",
        action="store_true",
        help="boot each instance from its EC2 user data, as the launch template gives it",
    )


async def _run(args: argparse.Namespace, settings: Settings) -> None:
    if args.worker_config is not None and not args.worker_config.is_file():
        raise ConfigurationError(f"worker config {args.worker_config} does not exist")
    clock = SystemClock()
    stop = stop_on_signals()
    config = settings.autoscaler
    fleet_settings = LocalFleetSettings(
        fleet_id=config.fleet_id,
        workdir=args.workdir,
        timeline=args.timeline or args.workdir / "timeline.jsonl",
        worker_config=args.worker_config.resolve() if args.worker_config else None,
        poll_seconds=args.poll_seconds,
    )
    session = aioboto3.Session(region_name=settings.region)
    async with (
        session.client("ec2", endpoint_url=settings.endpoint_url) as ec2,
        session.client("events", endpoint_url=settings.endpoint_url) as events,
    ):
        adapter = Ec2FleetAdapter(ec2, config.launch_template)
        timeline = Timeline(fleet_settings.timeline, clock)
        boot = InstanceBoot(ec2_user_data(ec2)) if args.user_data else None
        fleet = LocalFleet(adapter, fleet_settings, clock, timeline, boot)
        on_poll, store = None, None
        if settings.replay is not None:
            store = build_store(settings, clock)
            replay = SpotReplay(
                fleet,
                adapter,
                EventBridgeEvents(events),
                load_trace(settings.replay.trace),
                settings.replay.clock(),
                clock,
                ReplaySettings(args.min_notice_seconds, args.silent_every),
                StoreBusyInstances(store),
            )
            on_poll = replay.on_poll
        timeline.write("fleet_started")
        try:
            await fleet.run(stop, on_poll)
        finally:
            if store is not None:
                store.dispose()


def run_command(args: argparse.Namespace, settings: Settings) -> None:
    asyncio.run(_run(args, settings))
