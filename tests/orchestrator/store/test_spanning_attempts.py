"""An attempt that spans several GPUs of one worker (`gpu.count` > 1): every GPU it holds is
recorded, read back with its placement, kept from any other open attempt by the database, and
freed when the attempt ends."""

from __future__ import annotations

from autoscaler.demand import StoreDemand
from kernel.errors import ConcurrentModification
from kernel.job_record import JobMove, JobRecord
from kernel.job_state import JobState
from orchestrator.store.job_store import JobStore
from tests.support.jobs import submission

ASSIGN = (JobState.ASSIGNED,)


def test_a_spanning_attempt_holds_all_its_gpus_until_it_ends(store: JobStore) -> None:
    store.intake.accept_batch(
        [
            submission("big", "m1", gpu={"min_vram_gib": 24, "count": 4}),
            submission("small", "m2"),
        ]
    )
    (placed,) = store.apply_moves(
        [JobMove("big", 1, ASSIGN, "gang", worker_id="w1", gpu_index=2, span=(0, 1, 3))], "t"
    )
    assert isinstance(placed, JobRecord)
    [placement] = store.placements()
    assert (placement.worker_id, placement.gpu_index, placement.span) == ("w1", 2, (0, 1, 3))
    assert placement.gpus == (2, 0, 1, 3)
    # The database refuses a second open attempt on a GPU of the span, not only on its lead.
    (refused,) = store.apply_moves(
        [JobMove("small", 1, ASSIGN, "one GPU", worker_id="w1", gpu_index=3)], "t"
    )
    assert isinstance(refused, ConcurrentModification)
    # Ended (back to the queue through a checkpoint), the span's GPUs are free again.
    (requeued,) = store.apply_moves([JobMove("big", 2, (JobState.QUEUED,), "moved")], "t")
    assert isinstance(requeued, JobRecord)
    (now_placed,) = store.apply_moves(
        [JobMove("small", 1, ASSIGN, "one GPU", worker_id="w1", gpu_index=3)], "t"
    )
    assert isinstance(now_placed, JobRecord)
    assert [(p.job.job_id, p.gpus) for p in store.placements()] == [("small", (3,))]


def test_the_cost_ledger_reads_every_gpu_a_spanning_attempt_held(store: JobStore) -> None:
    store.intake.accept_batch([submission("big", "m1", gpu={"min_vram_gib": 24, "count": 2})])
    store.apply_moves(
        [JobMove("big", 1, ASSIGN, "gang", worker_id="i-0abc12345", gpu_index=1, span=(0,))], "t"
    )
    store.apply_moves([JobMove("big", 2, (JobState.QUEUED,), "moved")], "t")
    [span] = store.cost_facts.attempts_on(["i-0abc12345"])
    assert (span.gpu_index, span.span) == (1, (0,))
    assert span.holds(0)
    assert span.holds(1)
    assert not span.holds(2)


def test_the_autoscaler_counts_every_gpu_of_a_span_busy(store: JobStore) -> None:
    store.intake.accept_batch(
        [submission("big", "m1", gpu={"min_vram_gib": 24, "count": 3}), submission("one", "m2")]
    )
    store.apply_moves(
        [
            JobMove("big", 1, ASSIGN, "gang", worker_id="i-0abc12345", gpu_index=0, span=(1, 2)),
            JobMove("one", 1, ASSIGN, "one GPU", worker_id="i-0abc12345", gpu_index=3),
        ],
        "t",
    )
    assert StoreDemand(store).busy_gpus() == {"i-0abc12345": 4}
