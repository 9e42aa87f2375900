"""Only listed instances get work (issue 48): a hello from an instance the autoscaler has not
seen in EC2's list is refused and counted, and the worker gets nothing, whatever hardware it
claims (at 072fb48 a hello claiming a p5.48xlarge was taken as eight H100s and given eight
jobs); once the instance is listed, its worker is admitted on the next round, as EC2 has it."""

from __future__ import annotations

from kernel.clock import FakeClock
from kernel.instance_types import A10G_GIB
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.worker_protocol import Channel, GpuInfo, topic
from orchestrator.store.job_store import JobStore
from tests.support.control_plane import NOW, hello, listed, plane_in_memory
from tests.support.jobs import job_dict

STRANGER = "i-0cccccccccccccccc"


def grand_hello(clock: FakeClock) -> bytes:
    claimed = tuple(GpuInfo(index=i, family="h100", vram_gib=80) for i in range(8))
    return hello(STRANGER, clock, instance_type="p5.48xlarge", gpus=claimed)


async def test_an_unlisted_instance_gets_no_work_until_it_is_listed(store: JobStore) -> None:
    clock = FakeClock(NOW)
    plane, _ = plane_in_memory(store, clock)
    for n in range(8):
        spec = parse_job(job_dict(f"wanted-{n}"), now=None)
        store.intake.accept_batch([Submission(spec, f"m-{n}")])
    await plane.on_message(topic(STRANGER, Channel.HELLO), grand_hello(clock))
    await plane.tick()
    assert plane.registry.seen() == []
    assert all(store.get(f"wanted-{n}").worker_id is None for n in range(8))
    assert plane.refusals.count("unlisted_instance") == 1
    await plane.tick()  # held, not refused again each round
    assert plane.refusals.count("unlisted_instance") == 1

    listed(store, STRANGER, instance_type="g5.xlarge")  # what EC2 says it is
    await plane.tick()
    (worker,) = plane.registry.seen()
    assert worker.hello.instance_type == "g5.xlarge"
    assert [gpu.vram_gib for gpu in worker.hello.gpus] == [A10G_GIB]
    placed = [n for n in range(8) if store.get(f"wanted-{n}").worker_id == STRANGER]
    assert len(placed) == 1  # one A10G: one job, not eight
