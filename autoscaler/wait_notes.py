"""The autoscaler's word on each queued job, kept in the store where the API, the console and
`framefleet job` read it: why no GPU was bought for it this round ("no spot pool available now;
no deadline, so it waits"), or nothing once one was. Only what changed is written, so a steady
backlog costs no writes; a new leader writes its first round's whole view once."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from autoscaler.snapshot import Plan


class CapacityWaits(Protocol):
    def note_capacity_waits(self, reasons: Mapping[str, str | None]) -> None:
        """Why each job waits for capacity (None: it no longer does)."""
        ...


class WaitNotes:
    def __init__(self, sink: CapacityWaits) -> None:
        self._sink = sink
        self._written: dict[str, str | None] = {}

    def note(self, queued: Iterable[str], plans: Sequence[Plan]) -> None:
        """After a round: `queued` were planned, `plans` said which of them wait and why."""
        reasons: dict[str, str | None] = dict.fromkeys(queued)
        for decided in plans:  # a later round's word wins: it re-planned a failed launch
            for launch in decided.launches:
                reasons.update(dict.fromkeys(launch.job_ids))
            for wait in decided.waits:
                reasons[wait.job_id] = wait.reason
        changed = {j: r for j, r in reasons.items() if self._written.get(j, "") != r}
        self._sink.note_capacity_waits(changed)
        # Jobs that left the queue are forgotten: their notes no longer show.
        self._written = reasons
