"""The demo's producer: a script like the ones ML teams run, sending jobs to the SQS jobs queue
spread over the run. Priorities, deadlines, GPU needs and cost tags vary; one job is sent twice
(a producer's retry) and two messages are malformed (a buggy producer sending raw JSON).

    python -m framefleet.demo_producer --config .demo/framefleet.toml --jobs 8 --seed 7
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3

from framefleet.settings import load_settings
from kernel.settings_support import configure_logging, exit_with
from orchestrator.client import submit_job

DEMO_MODEL = "wan/tiny-demo"
OUTPUT_BUCKET = "framefleet-demo-output"
_PROMPTS = [
    ("trailer", "a paper boat drifting down a rainy street, cinematic", "marketing"),
    ("explainer", "an animated diagram of a heart pumping blood", "education"),
    ("research", "a robot arm stacking wooden blocks", "research"),
    ("trailer", "a hummingbird hovering over a red flower, macro", "marketing"),
    ("explainer", "a time-lapse of a city skyline from dusk to night", "education"),
    ("research", "waves crashing on black volcanic sand", "research"),
]


@dataclass(frozen=True)
class PlannedJob:
    send_after_seconds: float  # from the producer's start
    body: dict[str, Any]

    @property
    def job_id(self) -> str:
        return str(self.body["job_id"])


def demo_jobs(count: int, seed: int, start: datetime, over_seconds: float) -> list[PlannedJob]:
    """The jobs of a run, the same for the same seed: the demo checks every one of them."""
    rng = random.Random(seed)
    jobs = []
    for index in range(count):
        kind, prompt, team = _PROMPTS[index % len(_PROMPTS)]
        priority = rng.choice([2, 5, 7, 9])
        send_after = over_seconds * index / max(1, count)
        # Urgent work has a deadline a few minutes out; the rest is best effort.
        deadline = start + timedelta(seconds=send_after + 240) if priority >= 7 else None
        body = {
            "schema": "framefleet.job/v1",
            "job_id": f"{kind}-{seed}-{index:02d}",
            # The tiny random-weight model at a small size and few steps, so that eight jobs
            # render within the demo's minutes on a busy 2-core laptop
            # (tests/framefleet/test_demo.py).
            "model": DEMO_MODEL,
            "prompt": prompt,
            "negative_prompt": "blurry, low quality",
            "width": 128,
            "height": 128,
            "num_frames": 17,
            "fps": 8,
            "steps": rng.choice([16, 24, 32]),
            "guidance": 5.0,
            "seed": rng.randrange(2**31),
            "priority": priority,
            "deadline": deadline.isoformat() if deadline else None,
            "gpu": {"min_vram_gib": rng.choice([12, 15]), "families": ["v100"]},
            "output": f"s3://{OUTPUT_BUCKET}/{team}/",
            "tags": {"team": team, "project": "demo"},
        }
        jobs.append(PlannedJob(send_after, body))
    return jobs


def malformed_messages(seed: int) -> list[str]:
    """A truncated message, and a job whose size and step count no renderer accepts."""
    broken = {
        "schema": "framefleet.job/v1",
        "job_id": f"broken-{seed}",
        "model": DEMO_MODEL,
        "prompt": "a cat",
        "width": 1000,
        "height": 64,
        "num_frames": 9,
        "steps": 0,
        "seed": 1,
        "output": f"s3://{OUTPUT_BUCKET}/research/",
    }
    return ['{"schema": "framefleet.job/v1", "job_', json.dumps(broken)]


def produce(queue_url: str, sqs: Any, jobs: Sequence[PlannedJob], seed: int) -> None:
    started = time.monotonic()
    junk = malformed_messages(seed)
    for index, job in enumerate(jobs):
        # Paced in real time: this is a producer spreading its jobs over the run.
        time.sleep(max(0.0, job.send_after_seconds - (time.monotonic() - started)))
        submit_job(job.body, queue_url=queue_url, sqs=sqs)
        print(f"sent {job.job_id} (priority {job.body['priority']})", flush=True)
        if index == 0:
            submit_job(job.body, queue_url=queue_url, sqs=sqs)  # a retry: the same job_id
            print(f"sent {job.job_id} again (a producer's retry)", flush=True)
        if index == len(jobs) // 2 and junk:
            for body in junk:
                sqs.send_message(QueueUrl=queue_url, MessageBody=body)
            print(f"sent {len(junk)} malformed messages", flush=True)
            junk = []


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="framefleet.demo_producer", description=__doc__)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--over", type=float, default=40.0, help="seconds to spread jobs over")
    parser.add_argument("--start", help="the run's start (ISO 8601) the deadlines count from")
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    settings = load_settings(args.config)
    configure_logging(settings.log_level)
    jobs_url = settings.require_jobs_queue()
    start = datetime.fromisoformat(args.start) if args.start else datetime.now(UTC)
    sqs = boto3.client("sqs", region_name=settings.region, endpoint_url=settings.endpoint_url)
    produce(jobs_url, sqs, demo_jobs(args.jobs, args.seed, start, args.over), args.seed)
    return 0


if __name__ == "__main__":
    exit_with("framefleet.demo_producer", lambda: run())
