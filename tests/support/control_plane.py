"""The real control plane on the fake clock with its commands kept in memory, and the worker
messages (hello, events, heartbeats) that drive it, forged ones included."""

from __future__ import annotations

from datetime import UTC, datetime

from kernel.clock import FakeClock
from kernel.fleet_facts import InstanceSeen
from kernel.instance_types import CATALOG, L4_GIB
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.market import Market
from kernel.worker_protocol import (
    Channel,
    EventKind,
    GpuInfo,
    Heartbeat,
    Hello,
    WorkerEvent,
    topic,
)
from orchestrator.control.leadership import Leadership
from orchestrator.control.refusals import RefusedMessages
from orchestrator.control.service import ControlPlaneService
from orchestrator.control.settings import ControlSettings
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head
from simulator.fakes import KeptDeadLetters, MemoryLink
from tests.support.jobs import job_dict

NOW = datetime(2026, 12, 3, tzinfo=UTC)


# On EC2 a worker is its instance (orchestrator.control.identity): named by its instance id.
OWNER, OTHER = "i-0000000000000aaaa", "i-0000000000000bbbb"


WORKERS = (OWNER, OTHER)


def hello(
    worker_id: str,
    clock: FakeClock,
    vram_gib: float = L4_GIB,
    instance_type: str = "g6.xlarge",
    gpus: tuple[GpuInfo, ...] = (),
) -> bytes:
    """A worker's hello: one L4 (as NVML reports it) unless `gpus` says what it claims."""
    message = Hello(
        worker_id=worker_id,
        sent_at=clock.now(),
        instance_id=worker_id,
        instance_type=instance_type,
        availability_zone="us-east-1a",
        market="spot",
        gpus=gpus or (GpuInfo(index=0, family="l4", vram_gib=vram_gib),),
        agent_version="test",
    )
    return message.model_dump_json().encode()


def event(worker_id: str, kind: EventKind, job_id: str, attempt: int, **fields: object) -> bytes:
    message = WorkerEvent(
        worker_id=worker_id,
        sent_at=NOW,
        event_id=f"e-{kind.value.replace('_', '-')}-{worker_id}",
        kind=kind,
        job_id=job_id,
        attempt=attempt,
        **fields,
    )
    return message.model_dump_json().encode()


def listed(
    store: JobStore,
    *instance_ids: str,
    instance_type: str = "g6.xlarge",
    market: Market = Market.SPOT,
) -> None:
    """The instances as the autoscaler records them from EC2's list: only they get work."""
    kind = CATALOG[instance_type]
    store.cost_facts.record_instances_seen(
        [
            InstanceSeen(i, instance_type, "us-east-1a", market, NOW, kind.gpus, kind.family.value)
            for i in instance_ids
        ]
    )


def listed_in(database_url: str, *instance_ids: str, instance_type: str, market: Market) -> None:
    """`listed`, in the database of a control plane that may not have started yet."""
    engine = make_engine(database_url)
    upgrade_to_head(engine)
    store = JobStore(engine, FakeClock(NOW))
    try:
        listed(store, *instance_ids, instance_type=instance_type, market=market)
    finally:
        store.dispose()


def plane_in_memory(
    store: JobStore,
    clock: FakeClock,
    dead: KeptDeadLetters | None = None,
    leadership: Leadership | None = None,
) -> tuple[ControlPlaneService, MemoryLink]:
    """The real control plane on the fake clock, its commands kept in memory (no broker); a
    replica of several with `leadership`."""
    link = MemoryLink()
    listed(store, *WORKERS)
    plane = ControlPlaneService(
        store,
        clock,
        ControlSettings(),
        connect=lambda _deliver, _admit: link,
        refusals=RefusedMessages(clock, dead),
        leadership=leadership,
    )
    return plane, link


async def placed(store: JobStore, clock: FakeClock, plane: ControlPlaneService) -> str:
    """Both workers say hello; the job goes to one of them. Returns its worker."""
    for worker_id in WORKERS:
        await plane.on_message(topic(worker_id, Channel.HELLO), hello(worker_id, clock))
    store.intake.accept_batch([Submission(parse_job(job_dict("victim"), now=None), "m-1")])
    await plane.tick()
    owner = store.get("victim").worker_id
    assert owner in WORKERS
    return owner


CHECKPOINT = "checkpoints/victim/1/000002/manifest.json"


FORGERIES: list[tuple[EventKind, dict[str, object]]] = [
    (EventKind.STARTED, {}),
    (EventKind.CHECKPOINT_DURABLE, {"step": 2, "checkpoint": CHECKPOINT}),
    (EventKind.PREEMPTED, {"checkpoint": CHECKPOINT}),
    (EventKind.FINISHED, {"output": "s3://framefleet-output/videos/victim.mp4"}),
    (EventKind.FAILED, {"failure_kind": "job", "error": "forged"}),
    (EventKind.FAILED, {"failure_kind": "worker", "error": "forged"}),
    (EventKind.FAILED, {"failure_kind": "refused", "error": "forged"}),
]


async def started(plane: ControlPlaneService, store: JobStore, job_id: str) -> str:
    job = store.get(job_id)
    assert job.worker_id is not None
    message = event(job.worker_id, EventKind.STARTED, job_id, job.attempt)
    await plane.on_message(topic(job.worker_id, Channel.EVENTS), message)
    await plane.apply_pending()
    return job.worker_id


async def preempted(plane: ControlPlaneService, store: JobStore, job_id: str) -> None:
    job = store.get(job_id)
    assert job.worker_id is not None
    key = f"checkpoints/{job_id}/{job.attempt}/000002/manifest.json"
    message = event(job.worker_id, EventKind.PREEMPTED, job_id, job.attempt, checkpoint=key, step=2)
    await plane.on_message(topic(job.worker_id, Channel.EVENTS), message)
    await plane.apply_pending()


async def heartbeats(plane: ControlPlaneService, clock: FakeClock) -> None:
    for worker_id in WORKERS:
        beat = Heartbeat(worker_id=worker_id, sent_at=clock.now(), sequence=2)
        await plane.on_message(topic(worker_id, Channel.HEARTBEAT), beat.model_dump_json().encode())
