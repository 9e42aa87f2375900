"""A job's end on the deployment's EventBridge bus (issue 49), through moto: a rule on the bus
sends what FrameFleet puts there to a queue, as an operator's subscription would."""

from __future__ import annotations

import json
import uuid

import aioboto3
import boto3
from prometheus_client import CollectorRegistry

from kernel.clock import FakeClock
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from orchestrator.notices.eventbridge import EventBridgeSender
from orchestrator.notices.service import EVENTBRIDGE, NoticeService
from orchestrator.store.job_store import JobStore
from tests.support.jobs import job_dict
from tests.support.local_services import REGION


def _subscribed_queue(moto_endpoint: str, bus: str) -> str:
    events = boto3.client("events", region_name=REGION, endpoint_url=moto_endpoint)
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=moto_endpoint)
    events.create_event_bus(Name=bus)
    queue = sqs.create_queue(QueueName=f"{bus}-queue")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events.put_rule(
        Name="framefleet-jobs",
        EventBusName=bus,
        EventPattern=json.dumps({"source": ["framefleet"]}),
    )
    events.put_targets(
        Rule="framefleet-jobs", EventBusName=bus, Targets=[{"Id": "queue", "Arn": arn}]
    )
    return queue


async def test_a_jobs_end_reaches_a_queue_subscribed_to_the_bus(
    store: JobStore, clock: FakeClock, moto_endpoint: str
) -> None:
    bus = f"ff-notices-{uuid.uuid4().hex[:8]}"
    queue = _subscribed_queue(moto_endpoint, bus)
    session = aioboto3.Session(region_name=REGION)
    async with session.client("events", endpoint_url=moto_endpoint) as events:
        service = NoticeService(
            store.notices,
            {EVENTBRIDGE: EventBridgeSender(events, bus)},
            clock,
            lambda: True,
            CollectorRegistry(),
        )
        await service.step()  # the relay's cursor starts
        job_id = f"bus-{uuid.uuid4().hex[:8]}"
        spec = parse_job(job_dict(job_id), now=None)  # no webhook: the bus hears every end
        store.intake.accept_batch([Submission(spec, f"m-{job_id}")])
        store.transition(job_id, JobState.CANCELLED, expected_version=1, actor="t", reason="t")
        clock.advance(10)
        assert await service.step() == 1
    (row,) = store.notices.notices(job_id=job_id)
    assert (row.target, row.state) == ("eventbridge", "delivered")
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=moto_endpoint)
    (message,) = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=5)["Messages"]
    envelope = json.loads(message["Body"])
    assert (envelope["source"], envelope["detail-type"]) == ("framefleet", "job.cancelled")
    assert envelope["detail"]["job_id"] == job_id
    assert envelope["detail"]["notice_id"] == row.notice_id
