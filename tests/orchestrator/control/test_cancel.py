"""A user's cancel: a queued job at once, a running one at its worker's next step."""

from __future__ import annotations

from pathlib import Path

from kernel.clock import FakeClock, SystemClock
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.worker_protocol import Channel, CommandKind, EventKind, Heartbeat, JobProgress, topic
from orchestrator.control.cancel import cancel_job
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head
from tests.support.cli import framefleet
from tests.support.control_plane import OWNER, event, hello, plane_in_memory
from tests.support.jobs import job_dict


def test_framefleet_cancel_ends_a_queued_job_at_once(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'cancel.db'}"
    engine = make_engine(database_url)
    upgrade_to_head(engine)
    store = JobStore(engine, SystemClock())
    store.intake.accept_batch([Submission(parse_job(job_dict("unwanted"), now=None), "m-1")])
    env = {"FRAMEFLEET_DATABASE_URL": database_url}

    result = framefleet("cancel", "unwanted", "--reason", "wrong prompt", env=env)
    assert result.returncode == 0, result.stderr
    assert "cancelled unwanted (it was queued)" in result.stdout
    job = store.get("unwanted")
    assert job.state is JobState.CANCELLED
    assert store.history("unwanted")[-1].reason == "cancelled: wrong prompt"
    assert store.history("unwanted")[-1].actor.startswith("cli:")

    again = framefleet("cancel", "unwanted", env=env)
    assert again.returncode == 2
    assert again.stderr.strip() == "framefleet: error: job 'unwanted' already ended: cancelled"
    store.dispose()


async def test_a_running_job_is_stopped_on_its_worker_and_its_gpu_freed(
    store: JobStore, clock: FakeClock
) -> None:
    plane, link = plane_in_memory(store, clock)
    await plane.on_message(topic(OWNER, Channel.HELLO), hello(OWNER, clock))
    store.intake.accept_batch([Submission(parse_job(job_dict("victim"), now=None), "m-1")])
    await plane.tick()
    attempt = store.get("victim").attempt
    await plane.on_message(
        topic(OWNER, Channel.EVENTS),
        event(OWNER, EventKind.STARTED, "victim", attempt),
    )
    await plane.apply_pending()
    await plane.tick()
    assert store.get("victim").state is JobState.RUNNING
    link.commands.clear()

    cancel_job(store, "victim", "by the user", actor="test")
    await plane.tick()  # the control plane's next round no longer counts the job as running
    # The worker's next heartbeat still reports it: the control plane tells the worker to stop.
    progress = JobProgress(job_id="victim", attempt=attempt, gpu_index=0, step=3, total_steps=4)
    beat = Heartbeat(worker_id=OWNER, sent_at=clock.now(), sequence=1, jobs=(progress,))
    await plane.on_message(topic(OWNER, Channel.HEARTBEAT), beat.model_dump_json().encode())
    await plane.apply_pending()
    assert [(c.kind, c.job_id, c.attempt) for c in link.commands] == [
        (CommandKind.CANCEL, "victim", attempt)
    ]
    assert store.get("victim").state is JobState.CANCELLED
    assert all(p.job.job_id != "victim" for p in store.placements())  # its GPU is free
