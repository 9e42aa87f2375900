"""`make demo`: FrameFleet end to end on this machine, with nothing to set up.

Starts moto in server mode (a real AWS endpoint on 127.0.0.1), creates the jobs queue and its
dead-letter queue, submits sample jobs (a duplicate and two malformed ones among them), runs the
intake against an SQLite store, and prints the jobs table and the dead-letter queue with reasons.
Then two in-process spot workers render the jobs with a tiny model; one gets an interruption
notice, its job resumes on the other worker, and the video must match an uninterrupted render
byte for byte (see orchestrator/demo_render.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
from moto.server import ThreadedMotoServer
from rich.console import Console

from framefleet.cli import dead_letter_table, jobs_table, show_job
from framefleet.control_plane import build_store, control_plane
from framefleet.settings import IntakeConfig, Settings
from kernel.clock import SystemClock
from orchestrator.aws.dead_letters import peek_dead_letters
from orchestrator.client import submit_job

DEMO_DIR = Path(".demo")
PROMPTS = [
    ("trailer-001", "a paper boat drifting down a rainy street, cinematic", 9, "marketing"),
    ("trailer-002", "a hummingbird hovering over a red flower, macro", 7, "marketing"),
    ("explainer-101", "an animated diagram of a heart pumping blood", 5, "education"),
    ("explainer-102", "a time-lapse of a city skyline from dusk to night", 5, "education"),
    ("research-7", "a robot arm stacking wooden blocks", 2, "research"),
    ("research-8", "waves crashing on black volcanic sand", 2, "research"),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def sample_job(job_id: str, prompt: str, priority: int, team: str) -> dict[str, Any]:
    deadline = datetime.now(UTC) + timedelta(hours=6) if priority >= 7 else None
    return {
        "schema": "framefleet.job/v1",
        "job_id": job_id,
        # The demo's tiny random-weight model at a small size, so it renders in seconds on CPU.
        "model": "wan/tiny-demo",
        "prompt": prompt,
        "negative_prompt": "blurry, low quality",
        "width": 64,
        "height": 64,
        "num_frames": 17,
        "fps": 8,
        "steps": 30,
        "guidance": 5.0,
        "seed": 1234,
        "priority": priority,
        "deadline": deadline.isoformat() if deadline else None,
        "gpu": {"min_vram_gib": 24, "families": ["l40s", "a10g", "a100", "h100"]},
        "output": f"s3://framefleet-demo-output/{team}/",
        "tags": {"team": team, "project": "demo"},
    }


async def _run_intake(settings: Settings, expected: int, console: Console) -> None:
    stop = asyncio.Event()
    async with control_plane(settings, SystemClock()) as plane:
        task = asyncio.create_task(plane.run(stop))
        metrics = plane.intake_metrics
        outcomes = ("accepted", "duplicate", "dead_lettered")
        async with asyncio.timeout(60):
            # The counters are the only signal of progress; poll them.
            while sum(metrics.outcome(o) for o in outcomes) < expected:  # noqa: ASYNC110
                await asyncio.sleep(0.1)
        stop.set()
        await task
        console.print("intake: " + ", ".join(f"{o} {metrics.outcome(o)}" for o in outcomes))
        console.print(jobs_table(plane.store.list_jobs()))


async def _render(settings: Settings, endpoint: str, console: Console) -> bool:
    from framefleet.demo_render import run_render_stage

    store = build_store(settings, SystemClock())
    try:
        identical = await run_render_stage(endpoint, DEMO_DIR, store, PROMPTS[0][0], console)
        console.print(jobs_table(store.list_jobs()))
        show_job(store, PROMPTS[0][0], console)
    finally:
        store.dispose()
    return identical


def main() -> None:
    console = Console(width=max(Console().width, 150))
    # moto's HTTP server logs every request through werkzeug.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(name, "demo")
    shutil.rmtree(DEMO_DIR, ignore_errors=True)
    DEMO_DIR.mkdir()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=_free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        sqs = boto3.client("sqs", region_name="us-east-1", endpoint_url=endpoint)
        dead_url = sqs.create_queue(QueueName="framefleet-jobs-dlq")["QueueUrl"]
        jobs_url = sqs.create_queue(QueueName="framefleet-jobs")["QueueUrl"]
        console.print(f"moto server at {endpoint}; jobs queue {jobs_url}")

        jobs = [sample_job(*row) for row in PROMPTS]
        for job in jobs:
            submit_job(job, queue_url=jobs_url, sqs=sqs)
        # A producer retry (duplicate), and two messages a buggy producer could send raw.
        submit_job(jobs[0], queue_url=jobs_url, sqs=sqs)
        sqs.send_message(QueueUrl=jobs_url, MessageBody='{"schema": "framefleet.job/v1", "job_')
        broken = sample_job("bad-size", "a cat", 5, "research") | {"width": 1000, "steps": 0}
        sqs.send_message(QueueUrl=jobs_url, MessageBody=json.dumps(broken))
        console.print(f"submitted {len(PROMPTS) + 3} messages (1 duplicate, 2 malformed)")

        settings = Settings(
            endpoint_url=endpoint,
            jobs_queue_url=jobs_url,
            dead_letter_queue_url=dead_url,
            database_url=f"sqlite:///{DEMO_DIR / 'framefleet.db'}",
            intake=IntakeConfig(wait_seconds=1),
        )
        asyncio.run(_run_intake(settings, len(PROMPTS) + 3, console))
        console.print(dead_letter_table(peek_dead_letters(sqs, dead_url)))
        identical = asyncio.run(_render(settings, endpoint, console))
        if not identical:
            raise SystemExit("the resumed video differs from the reference")
        database = DEMO_DIR / "framefleet.db"
        console.print(f"store: {database}; inspect a job with")
        console.print(
            f"  FRAMEFLEET_DATABASE_URL=sqlite:///{database} .venv/bin/framefleet job trailer-001"
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
