"""The flooding worker of `benchmarks.worker_flood`, in a process of its own: `--rate` messages
a second for `--seconds` on its own heartbeat topic (QoS 0, as fast as paho sends), garbage or
valid heartbeats that each repeat 20 outcomes for jobs that do not exist (`--useless`, after a
hello). Prints what it sent as JSON.

    python -m benchmarks.flooder --port 1883 --worker-id i-0f100d0000000000f --rate 10000
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import UTC, datetime

from paho.mqtt.client import Client
from paho.mqtt.enums import CallbackAPIVersion

from kernel.market import Market
from kernel.worker_protocol import (
    Channel,
    EventKind,
    GpuInfo,
    Heartbeat,
    WorkerEvent,
    topic,
)
from kernel.worker_side import Machine, WorkerSide

SLICE = 0.01  # seconds: the pace is kept per slice
MARK = 987_654_321  # the sequence number's place in the heartbeat made ahead
MARK_BYTES = str(MARK).encode()


def useless_heartbeat(worker_id: str, sequence: int) -> bytes:
    now = datetime.now(UTC)
    outcomes = tuple(
        WorkerEvent(
            worker_id=worker_id,
            sent_at=now,
            event_id=f"flood-{sequence:08d}-{n:02d}",
            kind=EventKind.FINISHED,
            job_id=f"nosuch-{sequence:08d}-{n:02d}",
            attempt=1,
            output=f"s3://bench/out/nosuch-{n}.mp4",
        )
        for n in range(20)
    )
    beat = Heartbeat(worker_id=worker_id, sent_at=now, sequence=sequence, recent=outcomes)
    return beat.model_dump_json().encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--worker-id", required=True)
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--useless", action="store_true")
    args = parser.parse_args()
    client = Client(CallbackAPIVersion.VERSION2, client_id=args.worker_id)
    client.max_queued_messages_set(0)  # unbounded: the flood is the point
    client.connect("127.0.0.1", args.port)
    client.loop_start()
    where = topic(args.worker_id, Channel.HEARTBEAT)
    if args.useless:
        gpus = (GpuInfo(index=0, family="l40s", vram_gib=48),)
        machine = Machine(args.worker_id, "g6e.xlarge", "us-east-1a", Market.SPOT, gpus, "flood")
        hello = WorkerSide(args.worker_id).hello(datetime.now(UTC), machine)
        client.publish(hello.topic, hello.payload, qos=1)
    # Made ahead, so that the pace is the broker's and the control plane's, not pydantic's;
    # a heartbeat is read only if its sequence grows, so each one gets the next.
    template = useless_heartbeat(args.worker_id, MARK)
    garbage = [os.urandom(64 + n % 512) for n in range(2000)]
    sent, started = 0, time.monotonic()
    per_slice = max(1, round(args.rate * SLICE))
    while (elapsed := time.monotonic() - started) < args.seconds:
        for _ in range(per_slice):
            if args.useless:
                payload = template.replace(MARK_BYTES, str(sent + 1).encode(), 1)
            else:
                payload = garbage[sent % len(garbage)]
            client.publish(where, payload, qos=0)
            sent += 1
        ahead = (sent / args.rate) - (time.monotonic() - started)
        if ahead > 0:
            time.sleep(ahead)  # the flood's pace
    client.loop_stop()
    client.disconnect()
    print(json.dumps({"sent": sent, "seconds": elapsed}))


if __name__ == "__main__":
    main()
