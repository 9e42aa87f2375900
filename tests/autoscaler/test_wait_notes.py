"""Why a queued job waits, in the autoscaler's words, kept in the store for the API, the console
and `framefleet job`: written when it changes, cleared once a GPU is bought for the job, and
shown only while the job is queued."""

from __future__ import annotations

from collections.abc import Mapping

from autoscaler.pools import Pool
from autoscaler.snapshot import CapacityWait, Launch, Plan
from autoscaler.wait_notes import WaitNotes
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.market import Market
from orchestrator.store.job_store import JobStore
from tests.support.jobs import job_dict

NO_SPOT = "no spot pool available now; no deadline, so it waits"


class Counted:
    """The store, counting what each round writes."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self.writes: list[dict[str, str | None]] = []

    def note_capacity_waits(self, reasons: Mapping[str, str | None]) -> None:
        self.writes.append(dict(reasons))
        self.store.wait_notes.note_capacity_waits(reasons)


def test_a_waiting_jobs_reason_is_kept_until_a_gpu_is_bought_for_it(store: JobStore) -> None:
    store.intake.accept_batch([Submission(parse_job(job_dict(j), now=None), j) for j in ("a", "b")])
    sink = Counted(store)
    notes = WaitNotes(sink)
    notes.note(["a", "b"], [Plan(waits=(CapacityWait("a", NO_SPOT), CapacityWait("b", NO_SPOT)))])
    assert store.get("a").waiting_for == NO_SPOT
    notes.note(["a", "b"], [Plan(waits=(CapacityWait("a", NO_SPOT), CapacityWait("b", NO_SPOT)))])
    assert sink.writes[-1] == {}  # nothing changed: nothing written
    bought = Launch(Pool("g5.xlarge", "us-east-1a", Market.SPOT), 0.4, ("a",), "cheapest")
    # A failed launch re-planned: the later round's word wins.
    both = (CapacityWait("a", NO_SPOT), CapacityWait("b", NO_SPOT))
    notes.note(["a", "b"], [Plan(waits=both), Plan(launches=(bought,), waits=both[1:])])
    assert sink.writes[-1] == {"a": None}
    assert store.get("a").waiting_for is None
    assert store.get("b").waiting_for == NO_SPOT
    # Shown only while queued.
    b = store.get("b")
    store.transition("b", JobState.CANCELLED, expected_version=b.version, actor="t", reason="t")
    assert store.get("b").waiting_for is None
