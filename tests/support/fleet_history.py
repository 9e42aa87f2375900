"""A small fleet's history written into a real store through the product's own paths: the
autoscaler's facts (instances as EC2 lists them, prices as they change) and the control
plane's job events (assign, start, checkpoint, finish), on an injected clock."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import boto3

from kernel.clock import FakeClock
from kernel.fleet_facts import InstanceSeen, PriceSeen
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.market import Market
from kernel.worker_protocol import EventKind, WorkerEvent
from orchestrator.control.job_events import apply_event
from orchestrator.store.job_store import JobStore
from tests.support.jobs import apply_decision, job_dict
from tests.support.local_services import REGION

SPOT = Decimal("0.918")
ON_DEMAND = Decimal("3.06")


class FleetHistory:
    def __init__(self, store: JobStore, clock: FakeClock) -> None:
        self.store, self.clock = store, clock

    def price(
        self, usd_per_hour: Decimal, market: Market = Market.SPOT, zone: str = "us-east-1a"
    ) -> None:
        self.store.cost_facts.record_prices(
            [PriceSeen("p3.2xlarge", zone, market, self.clock.now(), usd_per_hour)]
        )

    def launch(self, market: Market = Market.SPOT, zone: str = "us-east-1a") -> str:
        instance_id = f"i-{uuid.uuid4().hex[:17]}"
        self.store.cost_facts.record_instances_seen(
            [
                InstanceSeen(
                    instance_id,
                    "p3.2xlarge",
                    zone,
                    market,
                    self.clock.now(),
                    1,
                    "v100",
                )
            ]
        )
        return instance_id

    def ready(self, instance_id: str) -> None:
        self.store.cost_facts.record_instance_ready(instance_id, self.clock.now())

    def end(self, instance_id: str, reason: str = "terminated") -> None:
        self.store.cost_facts.record_instance_ended(instance_id, self.clock.now(), reason)

    def submit(self, job_id: str, **fields: Any) -> None:
        spec = parse_job(job_dict(job_id, **fields), now=None)
        self.store.intake.accept_batch([Submission(spec, f"m-{job_id}")])

    def assign(self, job_id: str, instance_id: str) -> None:
        job = self.store.get(job_id)
        self.store.transition(
            job_id,
            JobState.ASSIGNED,
            expected_version=job.version,
            actor="test",
            reason="test",
            worker_id=instance_id,
            gpu_index=0,
        )

    def event(self, job_id: str, kind: EventKind, **fields: Any) -> None:
        job = self.store.get(job_id)
        assert job.worker_id is not None
        event = WorkerEvent.model_validate(
            {
                "worker_id": job.worker_id,
                "sent_at": self.clock.now(),
                "event_id": uuid.uuid4().hex[:16],
                "kind": kind,
                "job_id": job_id,
                "attempt": job.attempt,
                **fields,
            }
        )
        apply_decision(self.store, job, apply_event(job, event, self.clock.now()), "test")

    def checkpoint(self, job_id: str, step: int, write_seconds: float) -> None:
        job = self.store.get(job_id)
        key = f"s3://ckpt/checkpoints/{job_id}/{job.attempt}/{step:06d}/manifest.json"
        self.event(
            job_id,
            EventKind.CHECKPOINT_DURABLE,
            step=step,
            checkpoint=key,
            write_seconds=write_seconds,
        )

    def finish(self, job_id: str, model_load_seconds: float) -> None:
        self.event(
            job_id,
            EventKind.FINISHED,
            output=f"s3://framefleet-output/videos/{job_id}.mp4",
            denoise_seconds=60.0,
            model_load_seconds=model_load_seconds,
        )

    def advance(self, seconds: float) -> datetime:
        self.clock.advance(seconds)
        return self.clock.now()


def a_day_of_work(fleet: FleetHistory) -> tuple[datetime, datetime]:
    """A day's fleet from midnight UTC: spot with an hourly price change, an interrupted spot
    instance whose job loses the work after its checkpoint, an on-demand one, and jobs of
    two teams. Returns the day."""
    clock = fleet.clock
    day = datetime(clock.now().year, clock.now().month, clock.now().day, tzinfo=clock.now().tzinfo)
    clock.advance((day - clock.now()).total_seconds() + 3600)
    fleet.price(SPOT)
    fleet.price(Decimal("1.01"), zone="us-east-1b")
    fleet.price(ON_DEMAND, Market.ON_DEMAND)
    fleet.price(ON_DEMAND, Market.ON_DEMAND, zone="us-east-1b")
    calm, stormy = fleet.launch(), fleet.launch(zone="us-east-1b")
    steady = fleet.launch(Market.ON_DEMAND)
    for job, team in (
        ("render-a", "vfx"),
        ("render-b", "vfx"),
        ("render-c", "ads"),
        ("render-d", "ads"),
    ):
        fleet.submit(job, tags={"team": team, "customer": "acme", "project": "=1+2"})
    fleet.advance(240)
    for instance in (calm, stormy, steady):
        fleet.ready(instance)
    fleet.assign("render-a", calm)
    fleet.assign("render-b", stormy)
    fleet.assign("render-c", steady)
    for job in ("render-a", "render-b", "render-c"):
        fleet.event(job, EventKind.STARTED)
    fleet.advance(900)
    fleet.checkpoint("render-b", 40, write_seconds=12.0)
    fleet.advance(1500)
    fleet.price(Decimal("1.11"))  # calm's pool, mid-job
    fleet.advance(700)
    # stormy is reclaimed without a usable notice: render-b goes back to the queue.
    for state in (JobState.PREEMPTED, JobState.QUEUED):
        version = fleet.store.get("render-b").version
        fleet.store.transition(
            "render-b", state, expected_version=version, actor="test", reason="its instance is gone"
        )
    fleet.end(stormy, "spot interruption")
    fleet.finish("render-a", model_load_seconds=95.0)
    fleet.finish("render-c", model_load_seconds=80.0)
    fleet.advance(120)
    fleet.assign("render-b", calm)
    fleet.event("render-b", EventKind.STARTED)
    fleet.assign("render-d", steady)
    fleet.event("render-d", EventKind.STARTED)
    fleet.advance(2400)
    fleet.finish("render-b", model_load_seconds=0.0)
    fleet.finish("render-d", model_load_seconds=0.0)
    fleet.advance(300)
    fleet.store.instance_records.ask_to_drain([calm, steady], "scale-in: idle")
    fleet.advance(200)
    fleet.end(calm)
    fleet.end(steady)
    clock.advance((day + timedelta(days=1, minutes=30) - clock.now()).total_seconds())
    return day, day + timedelta(days=1)


def job_with_log(store: JobStore, moto_endpoint: str, job_id: str, lines: str) -> None:
    """A job on its first attempt whose worker wrote `lines` to its log beside the video."""
    fleet = FleetHistory(store, FakeClock())
    fleet.submit(job_id)
    fleet.assign(job_id, f"i-0{uuid.uuid4().hex[:16]}")
    bucket, key = store.get(job_id).spec.attempt_log(1)
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=moto_endpoint)
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key=key, Body=lines.encode())
