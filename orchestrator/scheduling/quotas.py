"""Team quotas and fair share (pure; Kueue's cluster queues and cohorts are the model).

A team with a quota has a nominal share of GPUs at once, per GPU family or for any family
("*": the families it names no share of). A job of the team is admitted while the team runs
fewer GPUs of that key than its share. Past it, the job may borrow: it is admitted while the
teams with a share of that key leave some of it idle (their shares less what they run), if its
quota lets it borrow; else it waits, and says why. A team may also have a spend per day: past it,
its queued jobs wait for the next day (what runs runs on). A team within its share whose job
finds no free GPU reclaims it: a job of a team running past its own share of that key gives way
(checkpoint first), whatever its priority. Jobs of teams without a quota, and jobs without a
team, are neither limited nor lent to.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kernel.job_record import QUOTA_WAIT

ANY_FAMILY = "*"


@dataclass(frozen=True)
class TeamQuota:
    gpus: Mapping[str, int]  # GPU family or "*" -> the team's nominal GPUs at once
    borrow: bool = True  # may run past its share on what other teams leave idle
    # USD a day (UTC) the team's jobs may cost (the ledger's lines of them, waste included);
    # past it its queued jobs wait until tomorrow and what runs runs on. None: no limit.
    spend_per_day: float | None = None


class ShareBook:
    """GPUs each team runs per key this tick, against the shares; the scheduler updates it as
    it assigns and preempts."""

    def __init__(
        self,
        quotas: Mapping[str, TeamQuota],
        running: Iterable[tuple[str | None, str]],
        spent_today: Mapping[str, float] | None = None,
    ) -> None:
        """`running`: (team, GPU family) of each job on a GPU; `spent_today`: USD per team."""
        self._quotas = quotas
        self._spent = spent_today or {}
        self._used: Counter[tuple[str, str]] = Counter()
        for team, family in running:
            self.take(team, family)

    def key(self, team: str | None, family: str) -> str | None:
        """Which of the team's shares a GPU of `family` counts against (None: no quota)."""
        quota = self._quotas.get(team) if team is not None else None
        if quota is None:
            return None
        return family if family in quota.gpus else ANY_FAMILY

    def _share(self, team: str, key: str) -> int:
        return self._quotas[team].gpus.get(key, 0)

    def _idle(self, key: str) -> int:
        """What the teams with a share of `key` leave of it, less what others borrow."""
        nominal = sum(q.gpus.get(key, 0) for q in self._quotas.values())
        used = sum(n for (_, k), n in self._used.items() if k == key)
        return nominal - used

    def spent_out(self, team: str | None) -> bool:
        quota = self._quotas.get(team) if team is not None else None
        limit = quota.spend_per_day if quota is not None else None
        return team is not None and limit is not None and self._spent.get(team, 0.0) >= limit

    def admits(self, team: str | None, family: str, borrow: bool = True) -> bool:
        """Within the team's share; or, with `borrow`, on what other teams leave idle."""
        key = self.key(team, family)
        if team is None or key is None:
            return True
        if self.spent_out(team):
            return False
        if self._used[(team, key)] < self._share(team, key):
            return True
        return borrow and self._quotas[team].borrow and self._idle(key) > 0

    def admits_several(self, team: str | None, family: str, count: int) -> bool:
        """`count` GPUs at once (a job that spans them), each within the share or borrowed."""
        taken = 0
        try:
            for _ in range(count):
                if not self.admits(team, family):
                    return False
                self.take(team, family)
                taken += 1
            return True
        finally:
            for _ in range(taken):
                self.give_back(team, family)

    def may_reclaim(self, team: str | None, family: str) -> bool:
        """The team runs less than its share of that family's key."""
        key = self.key(team, family)
        return (
            team is not None
            and key is not None
            and not self.spent_out(team)
            and (self._used[(team, key)] < self._share(team, key))
        )

    def _families(self, team: str, families: Iterable[str]) -> set[str]:
        """The families a job may use, as its team's quota names them (any: every key)."""
        return set(families) or set(self._quotas[team].gpus) or {ANY_FAMILY}

    def may_reclaim_any(self, team: str | None, families: Iterable[str]) -> bool:
        if team is None or team not in self._quotas:
            return False
        return any(self.may_reclaim(team, f) for f in self._families(team, families))

    def blocked(self, team: str, families: Iterable[str]) -> bool:
        """No family the job may use admits another job of its team."""
        if team not in self._quotas:
            return False
        return not any(self.admits(team, f) for f in self._families(team, families))

    def borrowing(self, team: str | None, family: str) -> bool:
        """The team runs past its share of that family's key."""
        key = self.key(team, family)
        return (
            team is not None
            and key is not None
            and (self._used[(team, key)] > self._share(team, key))
        )

    def take(self, team: str | None, family: str) -> None:
        key = self.key(team, family)
        if team is not None and key is not None:
            self._used[(team, key)] += 1

    def give_back(self, team: str | None, family: str) -> None:
        key = self.key(team, family)
        if team is not None and key is not None and self._used[(team, key)] > 0:
            self._used[(team, key)] -= 1

    def why_waits(self, team: str, families: Iterable[str]) -> str:
        """Why a job of `team` that may use these families (none: any) waits."""
        if self.spent_out(team):
            limit = self._quotas[team].spend_per_day or 0.0
            spent = self._spent.get(team, 0.0)
            return f"{QUOTA_WAIT}team {team} spent ${spent:,.2f} of its ${limit:,.2f} today"
        parts = []
        keys = {k for f in self._families(team, families) if (k := self.key(team, f)) is not None}
        for key in sorted(keys):
            used, share = self._used[(team, key)], self._share(team, key)
            lend = "may not borrow" if not self._quotas[team].borrow else "no share is idle"
            parts.append(f"{used} of its {share} {key} GPUs in use, {lend}")
        return f"{QUOTA_WAIT}team {team} runs " + "; ".join(parts)
