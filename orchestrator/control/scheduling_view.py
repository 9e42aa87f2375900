"""The scheduler's snapshots built from stored jobs, their reservations and the registry."""

from __future__ import annotations

from datetime import datetime

from kernel.job_record import JobRecord, Placement, Reservation
from kernel.job_state import JobState
from orchestrator.scheduling.registry import WorkerRegistry
from orchestrator.scheduling.snapshots import PendingJob, RunningJob


def steps_left(job: JobRecord) -> int:
    """Steps after its newest checkpoint (what a restart would have to do again)."""
    return job.spec.steps - job.checkpoint_step


def can_restart(job: JobRecord, reservation: Reservation | None, now: datetime) -> bool:
    """Could the job be stopped and started again elsewhere and still meet its deadline?
    Not once its deadline could no longer take an interruption (it may be on the on-demand
    GPU bought for exactly that)."""
    until = reservation.spot_until(job.deadline, steps_left(job)) if reservation else None
    return until is None or now <= until


def pending_jobs(
    queued: list[JobRecord],
    reserved: dict[str, Reservation],
    registry: WorkerRegistry,
    now: datetime,
) -> list[PendingJob]:
    pending = []
    for job in queued:
        reservation = reserved.get(job.job_id)
        holds = reservation is not None and reservation.holds(now)
        pending.append(
            PendingJob(
                job.job_id,
                job.priority,
                job.deadline,
                job.created_at,
                job.spec.gpu.min_vram_gib,
                frozenset(job.spec.gpu.families),
                reserved_on=frozenset(
                    registry.by_instance(reservation.instance_id) if reservation and holds else ()
                ),
                on_demand_only=holds and reservation is not None and reservation.on_demand,
                capacity_coming=holds,
                spot_until=reservation.spot_until(job.deadline, steps_left(job))
                if reservation
                else None,
            )
        )
    return pending


def running_jobs(
    placements: list[Placement], reserved: dict[str, Reservation], now: datetime
) -> dict[tuple[str, int], RunningJob]:
    return {
        (p.worker_id, p.gpu_index): RunningJob(
            p.job.job_id,
            p.job.priority,
            p.job.deadline,
            p.since,
            preemptible=p.job.state is JobState.RUNNING
            and can_restart(p.job, reserved.get(p.job.job_id), now),
        )
        for p in placements
    }
