"""A render split into stages, as the control plane keeps it: the autoscaler's split reaches
only a job that never ran, and goes into its history; each stage's attempt ends with a
`stage_done` that queues the job for the next stage from that stage's checkpoint (its attempt
counted as done work, not lost); only the decoding stage finishes the job. Each stage is placed
by its own GPU need, on a GPU warm with that stage's components where one is free."""

from __future__ import annotations

from datetime import UTC, datetime

from autoscaler.demand import job_demand
from kernel.clock import FakeClock
from kernel.job_record import JobRecord
from kernel.job_state import JobState
from kernel.render_stage import RenderStage, stage_need_gib, warm_key
from kernel.worker_protocol import EventKind, WarmModel, WorkerEvent
from orchestrator.control.job_events import Ignore, Move, Record, apply_event
from orchestrator.control.scheduling_view import pending_jobs
from orchestrator.scheduling.policy import schedule
from orchestrator.scheduling.registry import WorkerRegistry
from orchestrator.scheduling.snapshots import GpuSlot, WorkerSnapshot
from orchestrator.store.job_store import JobStore
from tests.support.jobs import apply_decision, submission

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
WORKER = "i-0abc1234567"
BIG = {"model": "wan/wan2.1-t2v-14b", "width": 1280, "height": 720, "num_frames": 81}


def stage_event(kind: EventKind, attempt: int, step: int, **fields: object) -> WorkerEvent:
    return WorkerEvent(
        worker_id=WORKER,
        sent_at=NOW,
        event_id=f"evt-{kind.value}-{attempt}-{step}".replace("_", "-"),
        kind=kind,
        job_id="j",
        attempt=attempt,
        step=step,
        **({"checkpoint": f"checkpoints/j/{attempt}/{step:06d}/manifest.json"} | fields),
    )


def run(store: JobStore, job: JobRecord) -> JobRecord:
    assigned = store.transition(
        "j",
        JobState.ASSIGNED,
        expected_version=job.version,
        actor="t",
        reason="r",
        worker_id=WORKER,
        gpu_index=0,
    )
    return store.transition(
        "j", JobState.RUNNING, expected_version=assigned.version, actor="t", reason="r"
    )


def test_only_a_job_that_never_ran_is_split_and_its_history_says_why(store: JobStore) -> None:
    store.intake.accept_batch([submission("j", "m1", **BIG), submission("k", "m2", **BIG)])
    run(store, store.get("j"))  # placed before the autoscaler's split reached it
    split = store.split_into_stages({"j": "stages save 20%", "k": "stages save 20%"}, "autoscaler")
    assert split == ["k"]
    k = store.get("k")
    assert (k.stage, k.state, k.version) == (RenderStage.ENCODE, JobState.QUEUED, 2)
    assert store.get("j").stage is None
    assert store.history("k")[-1].reason == "split into stages: stages save 20%"
    # Splitting again changes nothing.
    assert store.split_into_stages({"k": "again"}, "autoscaler") == []
    # Its next attempt needs a GPU for the text encoder only, and the autoscaler buys that.
    [pending] = pending_jobs([k], {}, WorkerRegistry(FakeClock(NOW)), NOW)
    assert pending.min_vram_gib == stage_need_gib(k.spec, RenderStage.ENCODE)
    assert pending.min_vram_gib < stage_need_gib(k.spec, None) / 3
    demand = job_demand(k)
    assert (demand.stage, demand.may_split) == (RenderStage.ENCODE, False)
    assert demand.min_vram_gib == pending.min_vram_gib


def test_each_stage_queues_the_next_from_its_checkpoint_until_decoding_finishes(
    store: JobStore,
) -> None:
    store.intake.accept_batch([submission("j", "m1", **BIG)])
    store.split_into_stages({"j": "always"}, "autoscaler")
    job = store.get("j")
    for attempt, (stage, step) in enumerate(
        ((RenderStage.ENCODE, 0), (RenderStage.DENOISE, 50)), start=1
    ):
        assert job.stage is stage
        job = run(store, job)
        decision = apply_event(job, stage_event(EventKind.STAGE_DONE, attempt, step), NOW)
        assert isinstance(decision, Move)
        job = apply_decision(store, job, decision, actor="control-plane")
        assert job.state is JobState.QUEUED
        assert job.last_checkpoint == f"checkpoints/j/{attempt}/{step:06d}/manifest.json"
        assert job.checkpoint_step == step
        # The same event again (QoS 1) changes nothing.
        again = apply_event(job, stage_event(EventKind.STAGE_DONE, attempt, step), NOW)
        assert isinstance(again, Ignore)
    assert job.stage is RenderStage.DECODE
    # A periodic checkpoint of the denoising stage that arrives late does not replace the
    # final one the decoding stage starts from.
    late = apply_event(job, stage_event(EventKind.CHECKPOINT_DURABLE, 2, 25), NOW)
    assert isinstance(late, Ignore)
    job = run(store, job)
    assert isinstance(apply_event(job, stage_event(EventKind.STAGE_DONE, 3, 50), NOW), Ignore)
    finished = apply_event(job, stage_event(EventKind.FINISHED, 3, 50, checkpoint=None), NOW)
    assert isinstance(finished, Move)
    done = apply_decision(store, job, finished, actor="control-plane")
    assert done.state is JobState.SUCCEEDED
    outcomes = [a.outcome for a in store.cost_facts.attempts_on([WORKER])]
    assert sorted(outcomes, key=str) == ["stage_done", "stage_done", "succeeded"]


def test_a_late_newer_checkpoint_is_still_recorded(store: JobStore) -> None:
    store.intake.accept_batch([submission("j", "m1")])
    job = run(store, store.get("j"))
    lost = store.transition(
        "j", JobState.PREEMPTED, expected_version=job.version, actor="t", reason="lost"
    )
    queued = store.transition(
        "j", JobState.QUEUED, expected_version=lost.version, actor="t", reason="back"
    )
    late = apply_event(queued, stage_event(EventKind.CHECKPOINT_DURABLE, 1, 2), NOW)
    assert isinstance(late, Record)


def test_a_stage_prefers_the_gpu_warm_with_that_stage_of_its_model(store: JobStore) -> None:
    store.intake.accept_batch([submission("k", "m1", **BIG), submission("w", "m2", **BIG)])
    store.split_into_stages({"k": "always"}, "autoscaler")
    model = str(BIG["model"])

    def gpu(worker_id: str, warm: str | None) -> WorkerSnapshot:
        return WorkerSnapshot(worker_id, (GpuSlot(worker_id, 0, "h100", 80, warm_model=warm),))

    fleet = [
        gpu("a", None),
        gpu("b", warm_key(model, None)),  # the whole pipeline
        gpu("c", warm_key(model, RenderStage.ENCODE)),  # its text encoder alone
    ]
    registry = WorkerRegistry(FakeClock(NOW))
    for job_id, worker_id in (("k", "c"), ("w", "b")):
        [pending] = pending_jobs([store.get(job_id)], {}, registry, NOW)
        [placed] = schedule([pending], fleet, NOW).assignments
        assert placed.worker_id == worker_id
    # What a worker says it holds: the stage only where one ran last.
    whole = WarmModel(gpu_index=0, model=model)
    assert "stage" not in whole.model_dump()
    encoder = WarmModel(gpu_index=0, model=model, stage=RenderStage.ENCODE)
    assert WarmModel.model_validate_json(encoder.model_dump_json()) == encoder
