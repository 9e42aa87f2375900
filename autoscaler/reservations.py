"""What a round bought or picked for each job, written for the control plane's scheduler.

A claim lasts until its instance has had time to boot and load the model and a while more, or,
on an instance already up, a few rounds: the scheduler gives a free GPU within a tick or two. A
claim is never extended by placing the job on the same instance again (the store keeps the
first expiry), so a job the scheduler cannot run there (the worker's slots are smaller than the
type's GPU, or the job avoids it) does not keep an idle instance billed for ever: the claim
lapses, the instance is used for other work or scaled in, and the job is not bought that type
again (`pool_choice.lapsed_on`). A claim on an instance taken back or ended before it ran the
job (a spot interruption during boot) says nothing of the type: it is not counted a lapse, and
another of the type is bought (issue 47: a job waited hours for a type it had never tried)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from autoscaler.actuation import Actuation
from autoscaler.deadline import interruption_seconds, new_instance_startup
from autoscaler.ec2.ports import ObservedInstance
from autoscaler.instances import InstanceRecord
from autoscaler.snapshot import JobDemand, LapsedClaim, Plan, PurchaseSettings
from autoscaler.throughput import ThroughputModel
from kernel.instance_state import GONE, LEAVING
from kernel.instance_types import kind_of
from kernel.job_record import Reservation
from kernel.market import Market

# How long a reservation outlives the expected boot and model load.
RESERVATION_GRACE = timedelta(minutes=10)
# Rounds a claim on an instance already up waits for the scheduler to use it.
UNUSED_ROUNDS = 4


def reservations_for(
    decided: Plan,
    done: Actuation,
    jobs: Sequence[JobDemand],
    instances: Mapping[str, ObservedInstance],
    settings: PurchaseSettings,
    model: ThroughputModel,
    now: datetime,
) -> list[Reservation]:
    """For each job placed or launched for: the instance, held until it has had time to boot
    and load the model and a while more, and the job's pace there, so the scheduler can keep it
    off spot GPUs once its deadline could no longer take an interruption."""
    by_id = {job.job_id: job for job in jobs}
    # Restarting on a free GPU (model load) plus one interruption, as choose_market counts.
    margin = settings.model_load_seconds + interruption_seconds(settings)
    startup = timedelta(seconds=new_instance_startup(settings))
    rounds = timedelta(seconds=UNUSED_ROUNDS * settings.reaction_seconds)
    picked = [(job_id, instance_id) for job_id, instance_id in decided.placed]
    picked += [(j, i.instance_id) for launch, i in done.launched for j in launch.job_ids]
    reservations = []
    for job_id, instance_id in picked:
        instance = instances.get(instance_id)
        job = by_id.get(job_id)
        if instance is not None and job is not None:
            on_demand = instance.pool.market is Market.ON_DEMAND
            family = kind_of(instance.pool.instance_type).family
            pace = model.seconds_per_step(job.shape, family)
            ready = instance.launched_at + startup
            expires = max(ready + RESERVATION_GRACE, now + rounds)
            reservations.append(Reservation(job_id, instance_id, on_demand, expires, pace, margin))
    return reservations


@dataclass
class Lapses:
    """Each queued job's instance types whose claims lapsed. The store keeps a job's latest
    claim only: a job that lapsed on a g6e and then on a p4d must not be bought a g6e again."""

    types: dict[str, frozenset[str]] = field(default_factory=dict)

    def claims(
        self, lapsed: Mapping[str, str], records: Mapping[str, InstanceRecord], ids: Iterable[str]
    ) -> dict[str, LapsedClaim]:
        """`lapsed`: job -> the instance of its latest claim that lapsed (among `ids`, the
        jobs read; a job of them with none now was placed, and is forgotten); `records`: the
        book's instances (kept a day after EC2 last listed them), for each one's type and
        state: one leaving or gone when its claim is first seen lapsed was taken back or ended,
        not found unable to run the job."""
        for job_id in ids:
            instance_id = lapsed.get(job_id)
            record = records.get(instance_id) if instance_id is not None else None
            if instance_id is None:
                self.types.pop(job_id, None)
            elif record is not None and record.state not in LEAVING | GONE:
                kind = record.pool.instance_type
                self.types[job_id] = self.types.get(job_id, frozenset()) | {kind}
        return {
            job_id: LapsedClaim(lapsed[job_id], self.types[job_id])
            for job_id in lapsed
            if job_id in self.types
        }
