from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlmodel import SQLModel

from kernel.clock import FakeClock
from kernel.errors import ConcurrentModification, InvalidTransition, JobNotFound
from kernel.job_record import (
    AcceptOutcome,
    JobChanges,
    JobMove,
    JobRecord,
    Rejection,
    Reservation,
)
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import alembic_config, upgrade_to_head
from tests.support.jobs import job_dict, submission


def test_accept_is_idempotent_per_job_id(store: JobStore) -> None:
    first = store.intake.accept_batch([submission("a", "m1"), submission("b", "m2")])
    again = store.intake.accept_batch([submission("a", "m3"), submission("c", "m4")])
    assert first == [AcceptOutcome.ACCEPTED, AcceptOutcome.ACCEPTED]
    assert again == [AcceptOutcome.DUPLICATE, AcceptOutcome.ACCEPTED]
    assert store.count_jobs() == 3
    assert store.count_by_state() == {JobState.QUEUED: 3}


def test_same_job_id_twice_in_one_batch_is_stored_once(store: JobStore) -> None:
    outcomes = store.intake.accept_batch([submission("twin", "m1"), submission("twin", "m2")])
    assert outcomes == [AcceptOutcome.ACCEPTED, AcceptOutcome.DUPLICATE]
    assert store.count_jobs() == 1


def test_same_job_id_with_another_spec_is_a_conflict(store: JobStore) -> None:
    store.intake.accept_batch([submission("x", "m1")])
    assert store.intake.accept_batch([submission("x", "m2", seed=7)]) == [AcceptOutcome.CONFLICT]
    assert store.get("x").spec.seed == 42


def test_transitions_record_who_why_when_and_count_attempts(
    store: JobStore, clock: FakeClock
) -> None:
    store.intake.accept_batch([submission("h", "m1")])
    clock.advance(10)
    record = store.transition(
        "h",
        JobState.ASSIGNED,
        expected_version=1,
        actor="scheduler",
        reason="fits w1",
        worker_id="w1",
    )
    assert (record.state, record.version, record.attempt) == (JobState.ASSIGNED, 2, 1)
    for target in (JobState.RUNNING, JobState.CHECKPOINTING, JobState.PREEMPTED, JobState.QUEUED):
        record = store.transition(
            "h", target, expected_version=record.version, actor="cp", reason=target.value
        )
    record = store.transition(
        "h", JobState.ASSIGNED, expected_version=record.version, actor="scheduler", reason="w2"
    )
    assert record.attempt == 2
    history = store.history("h")
    assert [(e.from_state, e.to_state) for e in history][:2] == [
        (None, JobState.QUEUED),
        (JobState.QUEUED, JobState.ASSIGNED),
    ]
    assert history[1].actor == "scheduler"
    assert history[1].reason == "fits w1"
    assert history[1].at - history[0].at == timedelta(seconds=10)
    assert [e.version for e in history] == list(range(1, len(history) + 1))
    assert history[-1].attempt == 2


def test_unknown_job_is_a_typed_error(store: JobStore) -> None:
    with pytest.raises(JobNotFound):
        store.get("nope")
    with pytest.raises(JobNotFound):
        store.transition("nope", JobState.ASSIGNED, expected_version=1, actor="a", reason="r")


def test_rejections_are_recorded_once_per_message(store: JobStore) -> None:
    rejection = Rejection("m-bad", "invalid_json", ("not JSON",), "{")
    assert store.intake.record_rejection(rejection) is True
    # Redelivered before the dead-letter send was confirmed: send again.
    assert store.intake.record_rejection(rejection) is True
    store.intake.mark_dead_lettered("m-bad")
    assert store.intake.record_rejection(rejection) is False
    assert store.intake.rejections() == [rejection]


def test_migrations_produce_exactly_the_models(database_url: str) -> None:
    engine = make_engine(database_url)
    upgrade_to_head(engine)
    upgrade_to_head(engine)  # idempotent
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), SQLModel.metadata)
        tables = set(inspect(connection).get_table_names())
    engine.dispose()
    assert diff == []
    assert {"jobs", "job_attempts", "job_events", "rejected_messages"} <= tables


@pytest.fixture
def two_postgres_stores(postgres_url: str) -> Iterator[tuple[JobStore, JobStore]]:
    """Two stores with their own engines: two control-plane replicas on one database."""
    engine_a, engine_b = make_engine(postgres_url), make_engine(postgres_url)
    upgrade_to_head(engine_a)
    yield JobStore(engine_a, FakeClock()), JobStore(engine_b, FakeClock())
    engine_a.dispose()
    engine_b.dispose()


@pytest.mark.parametrize("round_", range(5))
def test_two_concurrent_writers_on_postgres_one_wins(
    two_postgres_stores: tuple[JobStore, JobStore], round_: int
) -> None:
    replica_a, replica_b = two_postgres_stores
    job_id = f"race-{round_}"
    replica_a.intake.accept_batch([submission(job_id, "m")])
    version = replica_b.get(job_id).version
    barrier = threading.Barrier(2)
    results: dict[str, object] = {}

    def write(name: str, replica: JobStore, target: JobState) -> None:
        barrier.wait()
        try:
            results[name] = replica.transition(
                job_id, target, expected_version=version, actor=name, reason="race"
            )
        except ConcurrentModification as error:
            results[name] = error

    threads = [
        threading.Thread(target=write, args=("a", replica_a, JobState.ASSIGNED)),
        threading.Thread(target=write, args=("b", replica_b, JobState.CANCELLED)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    conflicts = [r for r in results.values() if isinstance(r, ConcurrentModification)]
    assert len(results) == 2
    assert len(conflicts) == 1
    final = replica_a.get(job_id)
    assert final.version == version + 1
    assert len(replica_a.history(job_id)) == 2
    winner = next(name for name, r in results.items() if not isinstance(r, ConcurrentModification))
    assert replica_a.history(job_id)[-1].actor == winner


def test_two_concurrent_batches_on_postgres_move_a_shared_job_once(
    two_postgres_stores: tuple[JobStore, JobStore],
) -> None:
    """Each batch is written one statement per table: a job the other replica moved between
    the read and the write sends the batch back one move at a time, and only that move fails."""
    replica_a, replica_b = two_postgres_stores
    ids = ["shared", *(f"a{i}" for i in range(5)), *(f"b{i}" for i in range(5))]
    replica_a.intake.accept_batch([submission(job_id, job_id) for job_id in ids])
    barrier = threading.Barrier(2)
    results: dict[str, list[JobRecord | Exception]] = {}

    def write(name: str, replica: JobStore) -> None:
        mine = ["shared", *(f"{name}{i}" for i in range(5))]
        moves = [
            JobMove(job_id, 1, (JobState.ASSIGNED,), name, worker_id=name, gpu_index=i)
            for i, job_id in enumerate(mine)
        ]
        barrier.wait()
        results[name] = list(replica.apply_moves(moves, actor=name))

    threads = [
        threading.Thread(target=write, args=(n, r)) for n, r in (("a", replica_a), ("b", replica_b))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    shared = [results[name][0] for name in ("a", "b")]
    assert sum(isinstance(r, ConcurrentModification) for r in shared) == 1
    assert all(isinstance(r, JobRecord) for name in ("a", "b") for r in results[name][1:])
    final = {job_id: replica_a.get(job_id) for job_id in ids}
    assert {(job.state, job.version, job.attempt) for job in final.values()} == {
        (JobState.ASSIGNED, 2, 1)
    }
    assert [e.version for e in replica_a.history("shared")] == [1, 2]


def test_placements_name_the_worker_and_gpu_of_the_current_attempt(store: JobStore) -> None:
    store.intake.accept_batch([submission("p1", "m1"), submission("p2", "m2")])
    store.transition(
        "p1",
        JobState.ASSIGNED,
        expected_version=1,
        actor="s",
        reason="r",
        worker_id="w1",
        gpu_index=3,
    )
    [placement] = store.placements()
    assert (placement.job.job_id, placement.worker_id, placement.gpu_index) == ("p1", "w1", 3)
    store.transition("p1", JobState.QUEUED, expected_version=2, actor="s", reason="refused")
    store.transition(
        "p1",
        JobState.ASSIGNED,
        expected_version=3,
        actor="s",
        reason="r",
        worker_id="w2",
        gpu_index=0,
    )
    [again] = store.placements()
    assert (again.job.attempt, again.worker_id, again.gpu_index) == (2, "w2", 0)


def test_schedulable_jobs_skip_backoff_and_include_urgent_and_oldest(
    store: JobStore, clock: FakeClock
) -> None:
    for index in range(6):
        store.intake.accept_batch([submission(f"s{index}", f"m{index}", priority=index)])
        clock.advance(1)
    held = store.get("s5")
    store.transition("s5", JobState.ASSIGNED, expected_version=held.version, actor="t", reason="r")
    store.transition(
        "s5",
        JobState.QUEUED,
        expected_version=held.version + 1,
        actor="t",
        reason="retry",
        changes=JobChanges(not_before=clock.now() + timedelta(minutes=5)),
    )
    ids = {job.job_id for job in store.schedulable(clock.now(), limit=2)}
    assert ids == {"s4", "s3", "s0", "s1"}  # two most urgent, two oldest; s5 is backing off
    clock.advance(301)
    assert "s5" in {job.job_id for job in store.schedulable(clock.now(), limit=2)}


def test_a_batch_commits_each_fenced_move_and_reports_the_rest(store: JobStore) -> None:
    store.intake.accept_batch(
        [submission(job_id, job_id) for job_id in ("ok", "stale", "bad", "cp")]
    )
    moves = [
        JobMove("ok", 1, (JobState.ASSIGNED, JobState.RUNNING), "fits", worker_id="w1"),
        JobMove("stale", 7, (JobState.ASSIGNED,), "someone else moved it"),
        JobMove("bad", 1, (JobState.SUCCEEDED,), "queued cannot succeed"),
        JobMove("ghost", 1, (JobState.ASSIGNED,), "no such job"),
        JobMove("cp", 1, (), "checkpoint", JobChanges(last_checkpoint="checkpoints/cp/1")),
    ]
    ok, stale, bad, ghost, cp = store.apply_moves(moves, actor="control-plane")
    assert isinstance(ok, JobRecord)
    assert ok.state is JobState.RUNNING
    assert (ok.version, ok.attempt) == (3, 1)
    assert isinstance(stale, ConcurrentModification)
    assert isinstance(bad, InvalidTransition)
    assert isinstance(ghost, JobNotFound)
    assert isinstance(cp, JobRecord)
    assert cp.state is JobState.QUEUED
    assert (cp.version, cp.last_checkpoint) == (2, "checkpoints/cp/1")
    # what a batch hands back is what a fresh read finds
    assert (ok, cp) == (store.get("ok"), store.get("cp"))
    # the refused moves left their jobs untouched and wrote no history
    assert store.get("stale").version == store.get("bad").version == 1
    assert [e.to_state for e in store.history("bad")] == [JobState.QUEUED]
    assert [e.to_state for e in store.history("ok")][-2:] == [JobState.ASSIGNED, JobState.RUNNING]
    assert [(p.job.job_id, p.worker_id) for p in store.placements()] == [("ok", "w1")]


def test_a_move_that_opens_and_ends_an_attempt_leaves_its_gpu_free(store: JobStore) -> None:
    store.intake.accept_batch([submission("whole", "m1"), submission("next", "m2")])
    path = (JobState.ASSIGNED, JobState.RUNNING, JobState.SUCCEEDED)
    (done,) = store.apply_moves(
        [JobMove("whole", 1, path, "all at once", worker_id="w1", gpu_index=0)], "t"
    )
    assert isinstance(done, JobRecord)
    assert (done.state, done.attempt, done.worker_id) == (JobState.SUCCEEDED, 1, "w1")
    assert done == store.get("whole")
    # Its attempt ended with it: the GPU takes the next job (one open attempt per GPU).
    (placed,) = store.apply_moves(
        [JobMove("next", 1, (JobState.ASSIGNED,), "free", worker_id="w1", gpu_index=0)], "t"
    )
    assert isinstance(placed, JobRecord)
    assert [p.job.job_id for p in store.placements()] == ["next"]


def test_a_batch_moves_each_job_at_most_once(store: JobStore) -> None:
    store.intake.accept_batch([submission("twice", "m1")])
    with pytest.raises(ValueError, match="at most once"):
        store.apply_moves(
            [JobMove("twice", 1, (JobState.ASSIGNED,), "a"), JobMove("twice", 2, (), "b")], "t"
        )
    assert store.get("twice").version == 1


def test_reservations_are_replaced_per_job_and_their_claims_expire(
    store: JobStore, clock: FakeClock
) -> None:
    store.intake.accept_batch([submission("r1", "m1"), submission("r2", "m2")])
    soon = clock.now() + timedelta(minutes=20)
    store.reservations.reserve(
        [Reservation("r1", "i-a", True, soon), Reservation("r2", "i-b", False, soon)]
    )
    store.reservations.reserve(
        [Reservation("r1", "i-c", False, soon + timedelta(minutes=5), 2.0, 900.0)]
    )
    held = store.reservations.of(["r1", "r2", "unknown"])
    assert {j: (r.instance_id, r.on_demand) for j, r in held.items()} == {
        "r1": ("i-c", False),
        "r2": ("i-b", False),
    }
    clock.advance(21 * 60)
    held = store.reservations.of(["r1", "r2"])
    assert [j for j, r in held.items() if r.holds(clock.now())] == ["r1"]
    # The pace outlives the claim: the deadline guard still needs it.
    assert (held["r1"].seconds_per_step, held["r1"].margin_seconds) == (2.0, 900.0)


def test_placing_a_job_uses_up_its_claim_and_ending_it_drops_the_rest(
    store: JobStore, clock: FakeClock
) -> None:
    store.intake.accept_batch([submission("u1", "m1")])
    store.reservations.reserve(
        [Reservation("u1", "i-a", True, clock.now() + timedelta(minutes=20))]
    )
    store.transition(
        "u1",
        JobState.ASSIGNED,
        expected_version=1,
        actor="s",
        reason="r",
        worker_id="i-a",
        gpu_index=0,
    )
    [(job_id, held)] = store.reservations.of(["u1"]).items()
    assert (job_id, held.instance_id, held.on_demand, held.holds(clock.now())) == (
        "u1",
        "",
        True,
        False,
    )
    assert store.reservations.live() == store.reservations.of(["u1"])  # what the scheduler reads
    store.transition("u1", JobState.CANCELLED, expected_version=2, actor="s", reason="done")
    assert store.reservations.of(["u1"]) == store.reservations.live() == {}


def test_the_checkpoint_step_of_existing_jobs_is_filled_from_their_key(sqlite_url: str) -> None:
    """Migration 0006 stores progress as a number; jobs stored before it keep their progress."""
    engine = make_engine(sqlite_url)
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0005")
        spec = parse_job(job_dict("old"), now=None)
        connection.execute(
            text(
                "INSERT INTO jobs (job_id, state, version, attempt, priority, model, spec_json,"
                " spec_sha256, source_message_id, created_at, updated_at, last_checkpoint,"
                " job_faults) VALUES ('old', 'queued', 3, 2, 5, :model, :spec, :sha, 'm-old',"
                " '2026-01-01 00:00:00', '2026-01-01 00:00:00',"
                " 'checkpoints/old/2/000042/manifest.json', 0)"
            ),
            {"model": spec.model, "spec": spec.canonical_json(), "sha": spec.fingerprint()},
        )
    upgrade_to_head(engine)
    assert JobStore(engine, FakeClock()).get("old").checkpoint_step == 42
    engine.dispose()
