"""Carry out a plan on EC2 (thin): one launch request per planned instance with a client token
and tags. Each launch stands alone: capacity errors go to the capacity memory and account-limit
errors to the account's limits, so the next plan buys elsewhere; any other error is logged and
counted; and the plan's other launches are tried either way."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

from autoscaler.ec2.ports import (
    CapacityUnavailable,
    Ec2Fleet,
    LaunchRequest,
    LaunchResult,
    LimitReached,
    ObservedInstance,
)
from autoscaler.market.capacity import CapacityMemory
from autoscaler.market.limits import AccountLimits
from autoscaler.snapshot import Launch, Plan
from kernel.clock import Clock
from kernel.errors import FrameFleetError

log = logging.getLogger(__name__)


@dataclass
class Actuation:
    launched: list[tuple[Launch, ObservedInstance]] = field(default_factory=list)
    # Launches that started nothing, and why: no capacity, an account limit, or an error
    # of another kind (EC2 down, a permission missing).
    failed: list[tuple[Launch, FrameFleetError]] = field(default_factory=list)
    terminated: list[str] = field(default_factory=list)


def client_token(fleet_id: str, launch: Launch, window: str) -> str:
    """The same launch within the same window (a crash and retry) reuses its token, so EC2
    returns the instances it already started instead of starting more."""
    # A launch for no job (pre-warming) is told apart from another by its reason.
    what = ",".join(sorted(launch.job_ids)) or launch.reason
    key = f"{fleet_id}|{launch.pool}|{what}|{window}"
    return f"ff-{uuid.uuid5(uuid.NAMESPACE_URL, key)}"


class Actuator:
    def __init__(
        self,
        ec2: Ec2Fleet,
        capacity: CapacityMemory,
        fleet_id: str,
        clock: Clock,
        limits: AccountLimits | None = None,
    ):
        self._ec2, self._capacity = ec2, capacity
        self._fleet_id, self._clock = fleet_id, clock
        self.limits = limits if limits is not None else AccountLimits(clock)

    async def execute(self, plan: Plan) -> Actuation:
        done = Actuation()
        window = self._clock.now().strftime("%Y%m%dT%H%M")[:-1]  # ten-minute windows
        for launch in plan.launches:
            request = LaunchRequest(
                self._fleet_id,
                launch.pool.market,
                (launch.pool, *launch.alternatives),
                1,
                client_token(self._fleet_id, launch, window),
                launch.reason,
                launch.job_ids,
            )
            held = self.limits.holding(launch.pool)
            if held is not None:  # a launch before it met this limit: EC2 would say it again
                done.failed.append((launch, LimitReached(launch.pool, "Held", held.why)))
                continue
            try:
                result = await self._ec2.launch(request)
            except FrameFleetError as error:  # this launch's, not the round's
                log.error("launch failed, the round goes on: %s: %s", launch.pool, error)
                done.failed.append((launch, error))
                continue
            self._learn(result)
            if result.instances:
                done.launched.extend((launch, instance) for instance in result.instances)
                log.info("launched %s: %s", result.instances[0].instance_id, launch.reason)
            else:
                done.failed.append((launch, _why_none(launch, result)))
        ids = [t.instance_id for t in plan.terminations]
        if ids:
            await self._ec2.terminate(ids)
            done.terminated.extend(ids)
            for termination in plan.terminations:
                log.info("terminated %s: %s", termination.instance_id, termination.reason)
        return done

    def _learn(self, result: LaunchResult) -> None:
        for error in result.errors:
            self._capacity.mark(error.pool, f"{error.code} on launch")
            log.warning("launch failed, pool avoided for a while: %s", error)
        for limit in result.limits:
            self.limits.reached(limit)
            log.warning("account limit met, what it limits avoided for a while: %s", limit)


def _why_none(launch: Launch, result: LaunchResult) -> FrameFleetError:
    refusals: list[CapacityUnavailable | LimitReached] = [*result.limits, *result.errors]
    if refusals:
        return refusals[0]
    return CapacityUnavailable(launch.pool, "NoInstances", "launch returned none")
