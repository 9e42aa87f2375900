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
import resource
import time
from pathlib import Path

from framefleet.heap import settle_heap
from kernel.clock import SystemClock, stop_on_signals
from kernel.mqtt_link import LinkSettings, MqttLink
from orchestrator.control.budgets import BudgetVerdict, MessageBudget
from orchestrator.control.leadership import Leadership
from orchestrator.control.reception import WORKER_TOPICS
from orchestrator.control.refusals import RefusedMessages
from orchestrator.control.service import ControlPlaneService
from orchestrator.control.settings import Admit, ControlSettings, MessageHandler, WorkerLink
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore

# Why worker messages were refused or dropped (orchestrator.control.reception).
REASONS = (
    *(verdict.value for verdict in BudgetVerdict if verdict is not BudgetVerdict.ALLOWED),
    "inbox_full",
    "malformed",
    "unknown_worker",
)


async def serve(args: argparse.Namespace) -> dict[str, object]:
    clock = SystemClock()
    stop = stop_on_signals()
    store = JobStore(make_engine(args.database), clock)
    link = LinkSettings(port=args.port, client_id=f"bench-cp-{args.name}")

    def connect(deliver: MessageHandler, admit: Admit) -> WorkerLink:
        return MqttLink(link, WORKER_TOPICS, deliver, clock, admit=admit)

    lease = Leadership(store.leases, clock, "control-plane", args.name)
    service = ControlPlaneService(
        store,
        clock,
        ControlSettings(
            tick_seconds=args.tick_seconds,
            workers_off_ec2=args.workers_off_ec2,
            budget=MessageBudget(per_second=args.messages_per_second, burst=args.message_burst),
        ),
        connect=connect,
        refusals=RefusedMessages(clock),
        leadership=lease,
    )
    waits: list[tuple[float, float]] = []  # (when, seconds the job waited to be assigned)
    service.stats.observe_assignment = lambda seconds: waits.append((time.time(), seconds))
    settle_heap()  # as `framefleet serve` does once it is set up
    print("ready", flush=True)
    await asyncio.gather(service.run(stop), lease.run(stop))
    store.dispose()
    return {
        "schedule_seconds": list(service.stats.schedule_seconds),
        "assignments": service.stats.assignments,
        "assignment_waits": waits,
        "health_changes": [
            [record.hello.worker_id, change.after.value, change.reason]
            for record in service.registry.seen()
            for change in record.history
            if change.before is not None
        ],
        "refused": {reason: service.refusals.count(reason) for reason in REASONS},
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "memory_sizes": service.memory_sizes(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--database", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--tick-seconds", type=float, default=0.2)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--workers-off-ec2", action="store_true")
    parser.add_argument("--messages-per-second", type=float, default=MessageBudget.per_second)
    parser.add_argument("--message-burst", type=float, default=MessageBudget.burst)
    args = parser.parse_args()
    args.results.write_text(json.dumps(asyncio.run(serve(args))))


if __name__ == "__main__":
    main()
