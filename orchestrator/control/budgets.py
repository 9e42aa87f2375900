"""Each worker's message budget: a token bucket per sender, checked before anything is parsed.

The sender is the worker id in the topic, the one level the broker's ACL ties to the worker's
account, so a worker spends only its own budget. A message past the bucket is dropped (the
worker repeats its outcomes in every heartbeat, so a healthy worker that bursts loses nothing
for long); a sender that keeps going past it is flooding, and is quarantined for a while.
Memory is the fleet's: a quiet sender's full bucket is forgotten (`forget_idle`, each tick),
and past `MAX_SENDERS` the least recent sender's bucket goes first.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from enum import StrEnum

from kernel.clock import Clock

MAX_SENDERS = 100_000


@dataclass(frozen=True)
class MessageBudget:
    # A healthy worker sends a heartbeat a second or two and a few events per job: far below.
    per_second: float = 50.0
    burst: float = 200.0
    # Messages dropped in one quarantine window that make a flood (not a burst).
    flood_after: int = 1000
    quarantine_seconds: float = 600.0


class BudgetVerdict(StrEnum):
    ALLOWED = "allowed"
    OVER_BUDGET = "over_budget"  # dropped
    FLOODING = "flooding"  # dropped, and the sender is quarantined from now
    QUARANTINED = "quarantined"  # within budget, from a quarantined sender


@dataclass
class _Bucket:
    tokens: float
    at: float  # monotonic seconds of the last refill
    dropped: int = 0  # in this window
    window_start: float = 0.0
    quarantined_until: float = 0.0


class SenderBudgets:
    def __init__(self, clock: Clock, budget: MessageBudget) -> None:
        self._clock = clock
        self._budget = budget
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def take(self, sender: str) -> BudgetVerdict:
        now = self._clock.monotonic()
        budget = self._budget
        bucket = self._buckets.get(sender)
        if bucket is None:
            bucket = _Bucket(tokens=budget.burst, at=now, window_start=now)
            self._buckets[sender] = bucket
            if len(self._buckets) > MAX_SENDERS:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(sender)
            bucket.tokens = min(budget.burst, bucket.tokens + (now - bucket.at) * budget.per_second)
            bucket.at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return (
                BudgetVerdict.QUARANTINED
                if now < bucket.quarantined_until
                else BudgetVerdict.ALLOWED
            )
        if now - bucket.window_start >= budget.quarantine_seconds:
            bucket.window_start, bucket.dropped = now, 0
        bucket.dropped += 1
        if bucket.dropped == budget.flood_after and now >= bucket.quarantined_until:
            bucket.quarantined_until = now + budget.quarantine_seconds
            return BudgetVerdict.FLOODING
        return BudgetVerdict.OVER_BUDGET

    def forget_idle(self) -> None:
        """Drop the buckets of senders quiet long enough to be full again and past any
        quarantine or count of drops: they hold nothing a fresh bucket would not (the least
        recent come first, so the scan stops at the first one still needed)."""
        now, budget = self._clock.monotonic(), self._budget
        refill = budget.burst / budget.per_second
        while self._buckets:
            sender, bucket = next(iter(self._buckets.items()))
            quiet = now - bucket.at
            if (
                quiet < refill
                or now < bucket.quarantined_until
                or (bucket.dropped and now - bucket.window_start < budget.quarantine_seconds)
            ):
                return
            del self._buckets[sender]

    def quarantined(self) -> list[str]:
        now = self._clock.monotonic()
        return [s for s, b in self._buckets.items() if now < b.quarantined_until]

    def remembered(self) -> int:
        return len(self._buckets)
