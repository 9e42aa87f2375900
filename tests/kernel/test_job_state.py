from __future__ import annotations

import itertools

import pytest

from kernel.errors import ConcurrentModification, InvalidTransition
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.job_state import JOB_TRANSITIONS, JobState, check_transition
from orchestrator.store.job_store import JobStore
from tests.support.jobs import job_dict

ALL_PAIRS = list(itertools.product(JobState, JobState))
ILLEGAL = [(a, b) for a, b in ALL_PAIRS if b not in JOB_TRANSITIONS[a]]
# The shortest path from queued to each state, through legal moves only.
PATH_TO = {
    JobState.QUEUED: [],
    JobState.ASSIGNED: [JobState.ASSIGNED],
    JobState.RUNNING: [JobState.ASSIGNED, JobState.RUNNING],
    JobState.CHECKPOINTING: [JobState.ASSIGNED, JobState.RUNNING, JobState.CHECKPOINTING],
    JobState.PREEMPTED: [JobState.ASSIGNED, JobState.RUNNING, JobState.PREEMPTED],
    JobState.SUCCEEDED: [JobState.ASSIGNED, JobState.RUNNING, JobState.SUCCEEDED],
    JobState.FAILED: [JobState.FAILED],
    JobState.CANCELLED: [JobState.CANCELLED],
}


def test_terminal_states_have_no_way_out() -> None:
    assert {s for s in JobState if s.terminal} == {
        JobState.SUCCEEDED,
        JobState.FAILED,
        JobState.CANCELLED,
    }


@pytest.mark.parametrize(("current", "target"), ILLEGAL)
def test_every_illegal_transition_is_refused_by_the_table(
    current: JobState, target: JobState
) -> None:
    with pytest.raises(InvalidTransition):
        check_transition("j", current, target)


def _job_in(store: JobStore, state: JobState, job_id: str) -> int:
    spec = parse_job(job_dict(job_id), now=None)
    store.intake.accept_batch([Submission(spec, f"msg-{job_id}")])
    version = 1
    for step in PATH_TO[state]:
        version = store.transition(
            job_id, step, expected_version=version, actor="test", reason="setup"
        ).version
    return version


@pytest.mark.parametrize("current", list(JobState))
def test_the_store_refuses_every_illegal_transition_and_changes_nothing(
    store: JobStore, current: JobState
) -> None:
    for index, target in enumerate(t for t in JobState if t not in JOB_TRANSITIONS[current]):
        job_id = f"j-{current.value}-{index}"
        version = _job_in(store, current, job_id)
        history_before = store.history(job_id)
        with pytest.raises(InvalidTransition):
            store.transition(job_id, target, expected_version=version, actor="t", reason="x")
        after = store.get(job_id)
        assert (after.state, after.version) == (current, version)
        assert store.history(job_id) == history_before


def test_a_stale_version_is_a_conflict(store: JobStore) -> None:
    version = _job_in(store, JobState.QUEUED, "stale")
    store.transition("stale", JobState.ASSIGNED, expected_version=version, actor="a", reason="r")
    with pytest.raises(ConcurrentModification, match="modified concurrently"):
        store.transition(
            "stale", JobState.CANCELLED, expected_version=version, actor="b", reason="r"
        )
    assert store.get("stale").state is JobState.ASSIGNED
