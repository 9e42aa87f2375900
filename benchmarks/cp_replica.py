"""One control-plane replica for the control-plane benchmark, in a process of its own as in
production (each replica is its own task): the real service with its leader lease and a
connection pool of its own. It prints `ready` once set up; on SIGTERM it writes what it
measured (scheduling decisions, assignments) to `--results` and exits.

    python -m benchmarks.cp_replica --port 1883 --database URL --name bench-0 --results r.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from kernel.clock import SystemClock, stop_on_signals
from kernel.heap import settle_heap
from kernel.mqtt_link import LinkSettings, MqttLink
from orchestrator.control.leadership import Leadership
from orchestrator.control.refusals import RefusedMessages
from orchestrator.control.service import WORKER_TOPICS, ControlPlaneService
from orchestrator.control.settings import ControlSettings, MessageHandler, WorkerLink
from orchestrator.store.engine import make_engine
from orchestrator.store.instances import InstanceLedger
from orchestrator.store.job_store import JobStore


async def serve(args: argparse.Namespace) -> dict[str, object]:
    clock = SystemClock()
    stop = stop_on_signals()
    store = JobStore(make_engine(args.database), clock)
    link = LinkSettings(port=args.port, client_id=f"bench-cp-{args.name}")

    def connect(deliver: MessageHandler) -> WorkerLink:
        return MqttLink(link, WORKER_TOPICS, deliver, clock)

    lease = Leadership(store, clock, "control-plane", args.name)
    service = ControlPlaneService(
        store,
        clock,
        ControlSettings(tick_seconds=args.tick_seconds),
        connect=connect,
        refusals=RefusedMessages(clock),
        instances=InstanceLedger(store.engine, clock),
        leadership=lease,
    )
    settle_heap()  # as `framefleet serve` does once it is set up
    print("ready", flush=True)
    await asyncio.gather(service.run(stop), lease.run(stop))
    store.dispose()
    return {
        "schedule_seconds": list(service.stats.schedule_seconds),
        "assignments": service.stats.assignments,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--database", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--tick-seconds", type=float, default=0.2)
    parser.add_argument("--results", type=Path, required=True)
    args = parser.parse_args()
    args.results.write_text(json.dumps(asyncio.run(serve(args))))


if __name__ == "__main__":
    main()
