"""Back to spot (pure): a job running on on-demand capacity moves to spot once its deadline can
take an interruption again and the move saves more than it risks.

SkyPilot's managed jobs, and Greedy, keep a job on on-demand to its end once the safety net
sent it there. But a job sent to on-demand while spot was gone often has hours left when spot
comes back. The move, in two steps, never stops the job to wait:
1. `spot_launches`: a spot instance is bought for the job while it keeps running. Only when
   - the deadline rule says spot, counting a whole new start-up and one interruption after it;
   - its on-demand instance runs it alone (nothing else would have to move);
   - the saving (its remaining work on on-demand, less the same work on spot with the pool's
     expected rework, less the new instance's start-up) beats `return_to_spot_margin_hours`
     of the on-demand GPU's price.
2. `ready_to_move`: once that instance has booted with a GPU still free, the on-demand instance
   is drained: the job checkpoints there and resumes on the spot GPU reserved for it, and the
   on-demand instance goes. If the spot instance is lost meanwhile, nothing moves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import timedelta

from autoscaler.deadline import MarketRule, new_instance_startup
from autoscaler.pool_choice import cost_per_step, pick_pool
from autoscaler.snapshot import (
    InstanceView,
    Launch,
    PlanInput,
    PurchaseSettings,
    RunningDemand,
    Terminate,
)
from autoscaler.throughput import ThroughputModel
from kernel.instance_types import kind_of
from kernel.market import Market


def _alone_on_demand(
    job: RunningDemand, instances: Mapping[str, InstanceView]
) -> InstanceView | None:
    instance = instances.get(job.instance_id)
    if instance is None or instance.pool.market is not Market.ON_DEMAND:
        return None
    return instance if instance.busy_gpus == 1 else None


def spot_launches(
    state: PlanInput,
    running: Sequence[RunningDemand],
    settings: PurchaseSettings,
    model: ThroughputModel,
    rule: MarketRule,
) -> list[Launch]:
    """Spot instances to buy for jobs on on-demand that are worth moving."""
    instances = {i.instance_id: i for i in state.instances}
    spot_pools = Counter(i.pool for i in state.instances if i.pool.market is Market.SPOT)
    launches = []
    for job in running:
        instance = _alone_on_demand(job, instances)
        if instance is None or job.demand.steps_left == 0:
            continue
        demand = replace(job.demand, running_on=Market.ON_DEMAND)
        family = kind_of(instance.pool.instance_type).family
        here = model.seconds(demand.shape, family, demand.steps_left)
        if rule(demand, state.now, here, settings).market is not Market.SPOT:
            continue
        picked = pick_pool(state, settings, model, demand, Market.SPOT, spot_pools)
        if picked is None:
            continue
        gpu_price = instance.price_per_hour / instance.gpus
        spot_kind = kind_of(picked.quote.pool.instance_type)
        startup_hours = new_instance_startup(settings) / 3600
        saving = (
            here / 3600 * gpu_price
            - cost_per_step(picked.quote, demand, model, settings, 1) * demand.steps_left
            - startup_hours * picked.quote.price_per_hour / spot_kind.gpus
        )
        if saving < settings.return_to_spot_margin_hours * gpu_price:
            continue
        spot_pools[picked.quote.pool] += 1
        reason = (
            f"job {demand.job_id} back to spot from on-demand {instance.instance_id}: "
            f"saves about ${saving:.2f} on its {demand.steps_left} steps left; "
            f"{picked.why}"
        )
        launches.append(
            Launch(
                picked.quote.pool,
                picked.quote.price_per_hour,
                (demand.job_id,),
                reason,
                picked.alternatives,
            )
        )
    return launches


def ready_to_move(
    state: PlanInput,
    running: Sequence[RunningDemand],
    held: Mapping[str, str],
    settings: PurchaseSettings,
) -> list[Terminate]:
    """On-demand instances to drain now (scale-in through the control plane): the spot
    instance held for their job has booted and has a free GPU."""
    instances = {i.instance_id: i for i in state.instances}
    boot = timedelta(seconds=settings.boot_seconds)
    moves = []
    for job in running:
        source = _alone_on_demand(job, instances)
        target = instances.get(held.get(job.demand.job_id, ""))
        if source is None or target is None or target.pool.market is not Market.SPOT:
            continue
        if state.now >= target.launched_at + boot and target.busy_gpus < target.gpus:
            moves.append(
                Terminate(
                    source.instance_id,
                    f"job {job.demand.job_id} moves to spot instance {target.instance_id}",
                )
            )
    return moves
