"""A long run keeps every in-memory map bounded: 2,400 jobs through the control plane on the
fake clock, by 20 generations of workers that come, work and go; 5,000 assignments through one
worker service; and an autoscaler whose instances come and go for days. The maps end the size
they had early on."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from autoscaler.ec2.fake import FakeEc2
from autoscaler.market.trace import load_trace
from kernel.bounded import BoundedSet
from kernel.clock import FakeClock
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.market import Market
from kernel.mqtt_link import MessageHandler
from kernel.worker_protocol import (
    Channel,
    CommandKind,
    EventKind,
    GpuInfo,
    Heartbeat,
    Hello,
    Status,
    WorkerEvent,
    topic,
)
from kernel.worker_side import RECENT_OUTCOMES
from orchestrator.control.service import ControlPlaneService
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head
from simulator.fakes import MemoryLink
from tests.support.autoscaling import TRACES, autoscaler
from tests.support.control_plane import listed, plane_in_memory
from tests.support.jobs import assignment, job_dict
from tests.support.workers import InstantRunner, NoNvml
from worker_ami.agent.object_store import S3ObjectStore
from worker_ami.agent.parts import WorkerParts
from worker_ami.agent.service import SEEN_ASSIGNMENTS, WorkerService
from worker_ami.agent.settings import WorkerSettings

GENERATIONS, WORKERS, GPUS, JOBS = 20, 4, 4, 120


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> Iterator[JobStore]:
    engine = make_engine(f"sqlite:///{tmp_path / 'long.db'}")
    upgrade_to_head(engine)
    job_store = JobStore(engine, clock)
    yield job_store
    job_store.dispose()


class Fleet:
    """Workers that answer every assignment at once: started, then finished."""

    def __init__(self, plane: ControlPlaneService, link: MemoryLink, clock: FakeClock) -> None:
        self.plane, self.link, self.clock = plane, link, clock
        self.sequence = 0

    async def send(self, channel: Channel, worker_id: str, message: object) -> None:
        assert isinstance(message, Hello | Heartbeat | WorkerEvent | Status)
        await self.plane.on_message(topic(worker_id, channel), message.model_dump_json().encode())

    def hello(self, worker_id: str) -> Hello:
        gpus = tuple(GpuInfo(index=i, family="l4", vram_gib=24) for i in range(GPUS))
        return Hello(
            worker_id=worker_id,
            sent_at=self.clock.now(),
            instance_id=worker_id,  # on EC2 a worker is its instance
            instance_type="g6.12xlarge",
            availability_zone="us-east-1a",
            market=Market.SPOT,
            gpus=gpus,
            agent_version="test",
        )

    async def answer(self) -> None:
        commands, self.link.commands = self.link.commands, []
        for command in commands:
            if command.kind is not CommandKind.ASSIGN or command.spec is None:
                continue
            for kind in (EventKind.STARTED, EventKind.FINISHED):
                event = WorkerEvent(
                    worker_id=command.worker_id,
                    sent_at=self.clock.now(),
                    event_id=f"{kind.value.replace('_', '-')}-{command.command_id}"[:64],
                    kind=kind,
                    job_id=command.job_id,
                    attempt=command.attempt,
                    output=f"{command.spec.output}{command.job_id}.mp4"
                    if kind is EventKind.FINISHED
                    else None,
                )
                await self.send(Channel.EVENTS, command.worker_id, event)

    async def beat(self, worker_ids: list[str]) -> None:
        self.sequence += 1
        for worker_id in worker_ids:
            beat = Heartbeat(worker_id=worker_id, sent_at=self.clock.now(), sequence=self.sequence)
            await self.send(Channel.HEARTBEAT, worker_id, beat)


async def test_a_long_run_through_the_control_plane_keeps_its_maps_bounded(
    store: JobStore, clock: FakeClock
) -> None:
    plane, link = plane_in_memory(store, clock)
    fleet = Fleet(plane, link, clock)
    sizes = []
    for generation in range(GENERATIONS):
        workers = [f"i-{generation * 10 + n:017x}" for n in range(WORKERS)]
        listed(store, *workers, instance_type="g6.12xlarge")  # as the autoscaler records them
        for worker_id in workers:
            await fleet.send(Channel.HELLO, worker_id, fleet.hello(worker_id))
        ids = [f"g{generation}-j{n}" for n in range(JOBS)]
        store.intake.accept_batch(
            [Submission(parse_job(job_dict(i), now=None), f"m-{i}") for i in ids]
        )
        for _ in range(10 * JOBS):  # a bound: a fleet that runs nothing fails, not hangs
            if store.count_by_state().get(JobState.SUCCEEDED, 0) >= (generation + 1) * JOBS:
                break
            await plane.tick()
            await fleet.answer()
            await fleet.beat(workers)
            await plane.apply_pending()
            clock.advance(1)
        for worker_id in workers:  # this generation leaves
            offline = Status(worker_id=worker_id, sent_at=clock.now(), online=False)
            await fleet.send(Channel.STATUS, worker_id, offline)
        await plane.apply_pending()
        clock.advance(2 * 3600)
        await plane.tick()
        sizes.append(plane.memory_sizes())

    assert store.count_by_state() == {JobState.SUCCEEDED: GENERATIONS * JOBS}
    assert sizes[-1] == sizes[0]  # after 2,400 jobs no bigger than after the first 120
    assert max(size for s in sizes for size in s.values()) <= WORKERS * GPUS


async def test_the_autoscaler_forgets_instances_gone_for_a_day(sqlite_url: str) -> None:
    trace = load_trace(TRACES)
    clock = FakeClock(trace.start)
    engine = make_engine(sqlite_url)
    upgrade_to_head(engine)
    jobs = JobStore(engine, clock)
    remembered = []
    ec2 = FakeEc2(clock)
    loop = autoscaler(jobs, clock, ec2)
    for day in range(4):
        jobs.intake.accept_batch([Submission(parse_job(job_dict(f"d{day}"), now=None), f"m{day}")])
        await loop.once()
        for job in jobs.list_jobs(JobState.QUEUED):  # served elsewhere; its instance goes idle
            jobs.transition(
                job.job_id,
                JobState.CANCELLED,
                expected_version=job.version,
                actor="test",
                reason="done",
            )
        await ec2.terminate(list(ec2.instances))
        clock.advance(25 * 3600)
        await loop.once()
        remembered.append(loop.remembered())
    # Four instances came and went; the loop remembers no more than after the first.
    assert remembered == [remembered[0]] * len(remembered)
    jobs.dispose()


class KeptLink:
    """The worker's link without a broker: what it publishes is kept; finishes are signalled."""

    def __init__(self) -> None:
        self.connected = asyncio.Event()
        self.published = 0
        self.finished = asyncio.Event()

    async def publish(self, topic: str, payload: str, retain: bool = False) -> None:
        self.published += 1
        if '"kind":"finished"' in payload:
            self.finished.set()

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()


async def test_a_long_run_through_the_worker_service_keeps_its_maps_bounded(
    tmp_path: Path, clock: FakeClock
) -> None:
    """5,000 assignments, more than the service remembers, each finished at once."""
    link = KeptLink()
    handlers: list[MessageHandler] = []

    def connect(on_command: MessageHandler, on_connect: object, will: object) -> KeptLink:
        handlers.append(on_command)
        return link

    settings = WorkerSettings(
        imds_enabled=False, cache_dir=tmp_path, cpu_slots=1, allow_cpu=True, min_free_disk_gib=0
    )
    parts = WorkerParts(
        settings,
        InstantRunner(),
        cast(S3ObjectStore, None),
        None,
        None,
        clock,
        lambda _device, _gpu: InstantRunner(),
        NoNvml(),
    )
    service = WorkerService("w-long", parts, clock, connect)
    spec = parse_job(job_dict("template"), now=None)
    for n in range(5000):
        job = spec.model_copy(update={"job_id": f"job-{n}"})
        link.finished.clear()
        await handlers[0](*assignment("w-long", job, clock.now(), f"assign-{n:08d}"))
        await asyncio.wait_for(link.finished.wait(), 5)
    sizes = service.memory_sizes()
    assert sizes["seen_assignments"] == SEEN_ASSIGNMENTS < 5000
    assert sizes["recent"] == RECENT_OUTCOMES
    assert link.published == 2 * 5000  # started and finished, each job once


def test_a_bounded_set_keeps_only_its_newest_members() -> None:
    seen: BoundedSet[int] = BoundedSet(3)
    assert all(seen.add(n) for n in range(5))
    assert not seen.add(4)
    assert (len(seen), 0 in seen, 1 in seen, 4 in seen) == (3, False, False, True)
