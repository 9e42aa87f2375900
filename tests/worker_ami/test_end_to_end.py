"""The whole system on one machine: SQS intake (moto), the control plane (in process), three
`framefleet-worker serve` processes with their own IMDS emulators, and a Mosquitto of the test's
own. One worker gets a spot notice in the middle of a job and is SIGKILLed once its checkpoint is
reported; every job still succeeds and the resumed video equals an uninterrupted render."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from typing import TYPE_CHECKING

from framefleet.control_plane import control_plane
from framefleet.settings import ControlConfig
from kernel.clock import SystemClock
from kernel.job_state import JobState
from tests.support.renders import read_object, video_job
from tests.support.waits import async_wait_until
from tests.worker_ami.system import (
    LocalSystem,
    fleet,
    route_ec2_events_to,
    spot_warning,
    where_running,
)
from worker_ami.agent.report import RunStatus
from worker_ami.agent.runner import JobRunner

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


async def test_an_interrupted_job_resumes_elsewhere_and_every_job_succeeds_once(
    runner: JobRunner,
    s3: S3Client,
    system: LocalSystem,
) -> None:
    interruptions_url = system.sqs.create_queue(QueueName=f"interruptions-{uuid.uuid4().hex[:8]}")[
        "QueueUrl"
    ]
    arn = system.sqs.get_queue_attributes(QueueUrl=interruptions_url, AttributeNames=["QueueArn"])
    events = route_ec2_events_to(system.moto_endpoint, arn["Attributes"]["QueueArn"])
    settings = system.plane_settings(ControlConfig(tick_seconds=0.2), interruptions_url)
    target = video_job(system.buckets, "e2e-target", steps=300, priority=9)
    others = [video_job(system.buckets, f"e2e-{i}", steps=20, priority=5) for i in range(5)]
    system.submit(target, *others)

    stop = asyncio.Event()
    async with (
        control_plane(settings, SystemClock()) as plane,
        fleet(system) as workers,
    ):
        store = plane.store
        task = asyncio.create_task(plane.run(stop))
        try:
            await async_wait_until(lambda: where_running(store, target.job_id) is not None, 120)
            victim = where_running(store, target.job_id)
            assert victim is not None
            # The same interruption from both sources, as AWS sends it: IMDS and EventBridge.
            workers.emulators[victim].set_instance_action("terminate")
            instance_id = workers.emulators[victim].identity.instance_id
            events.put_events(
                Entries=[
                    {
                        "Source": "aws.ec2",
                        "DetailType": "EC2 Spot Instance Interruption Warning",
                        "Detail": spot_warning(instance_id),
                        "Resources": [],
                    }
                ]
            )
            # Killed once its checkpoint is reported (the job is back in the queue with it).
            await async_wait_until(lambda: store.get(target.job_id).attempt >= 2, 60)
            assert store.get(target.job_id).last_checkpoint is not None
            workers.processes[victim].send_signal(signal.SIGKILL)
            everything = [target, *others]
            await async_wait_until(
                lambda: all(store.get(s.job_id).state is JobState.SUCCEEDED for s in everything),
                180,
            )
            assert plane.interruptions is not None
            await async_wait_until(lambda: plane.interruptions.handled >= 1, 30)  # type: ignore[union-attr]
            assert plane.service is not None
        finally:
            stop.set()
            await task
        history = store.history(target.job_id)
        final = store.get(target.job_id)

    assert JobState.PREEMPTED in [e.to_state for e in history]
    assert final.attempt >= 2
    assert [e.to_state for e in history].count(JobState.SUCCEEDED) == 1
    metadata = json.loads(read_object(s3, system.buckets.outputs, "e2e-target/e2e-target.json"))
    assert metadata["resumed_from"] is not None
    reference = await runner.run(
        video_job(system.buckets, "e2e-reference", steps=300, priority=9), 1
    )
    assert reference.status is RunStatus.SUCCEEDED
    assert metadata["video_sha256"] == reference.video_sha256
