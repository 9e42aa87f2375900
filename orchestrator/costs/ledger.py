"""The cost ledger: the store's facts (instance lives, prices as they changed, attempts)
priced into lines, for any period. Nothing is cached between calls, so a restarted process
reads the same money as the one before it."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Protocol

from kernel.clock import Clock
from kernel.market import Market
from orchestrator.costs.attribution import CostLine, Prices, instance_lines
from orchestrator.costs.money import ZERO
from orchestrator.costs.pricing import PriceSchedule, ebs_per_hour
from orchestrator.store.cost_facts import AttemptSpan, InstanceLife, PoolKey


class CostFacts(Protocol):
    """What the ledger reads of the store."""

    def instance_lives(self, since: datetime, until: datetime) -> list[InstanceLife]: ...

    def price_changes(
        self, pools: Sequence[PoolKey], until: datetime
    ) -> dict[PoolKey, list[tuple[datetime, Decimal]]]: ...

    def attempts_on(self, instance_ids: Sequence[str]) -> list[AttemptSpan]: ...


@dataclass(frozen=True)
class CostSettings:
    # Each instance's EBS root volume (gp3, us-east-1 list price).
    ebs_gib: int = 200
    ebs_usd_per_gib_month: Decimal = Decimal("0.08")
    # S3 (standard, us-east-1 list price): a checkpoint is a few safetensors blobs and its
    # manifest, an output is the MP4 and its metadata.
    s3_usd_per_1000_puts: Decimal = Decimal("0.005")
    puts_per_checkpoint: int = 5
    puts_per_output: int = 2


@dataclass
class LedgerPeriod:
    since: datetime
    until: datetime
    lines: list[CostLine]
    lives: list[InstanceLife]
    attempts: list[AttemptSpan]
    incomplete: list[str] = field(default_factory=list)  # why the numbers may be short
    usd_per_hour_now: Decimal = ZERO  # what the instances still alive cost per hour now

    @property
    def total(self) -> Decimal:
        return sum((line.usd for line in self.lines), ZERO)

    def of_teams(self, teams: Collection[str]) -> LedgerPeriod:
        """What these teams' jobs cost: their lines, waste on them included; the fleet's idle
        and boot time is no team's, so it stays out (a team's token sees no other team's)."""
        lines = [line for line in self.lines if line.tags is not None and line.tags.team in teams]
        used = {line.instance_id for line in lines}
        return replace(
            self,
            lines=lines,
            lives=[life for life in self.lives if life.instance_id in used],
            attempts=[span for span in self.attempts if span.tags.team in teams],
            usd_per_hour_now=ZERO,
        )


class CostLedger:
    def __init__(self, facts: CostFacts, clock: Clock, settings: CostSettings | None = None):
        self._facts = facts
        self._clock = clock
        self.settings = settings or CostSettings()

    def period(self, since: datetime, until: datetime) -> LedgerPeriod:
        """Every line of [since, until); live instances are billed up to now."""
        now = self._clock.now()
        lives = self._facts.instance_lives(since, min(until, now))
        pools = [life.pool for life in lives]
        pools += [(t, z, Market.ON_DEMAND) for t, z, _ in pools]
        history = self._facts.price_changes(pools, min(until, now))
        attempts = self._facts.attempts_on([life.instance_id for life in lives])
        by_instance: dict[str, list[AttemptSpan]] = {}
        for span in attempts:
            by_instance.setdefault(span.instance_id, []).append(span)
        ebs = ebs_per_hour(self.settings.ebs_gib, self.settings.ebs_usd_per_gib_month)
        result = LedgerPeriod(since, until, [], lives, attempts)
        for life in lives:
            prices = self._prices(life, history, ebs, result.incomplete)
            if life.ended_at is None:
                result.usd_per_hour_now += prices.compute.at(now) + ebs
            result.lines.extend(
                instance_lines(
                    life, by_instance.get(life.instance_id, []), prices, (since, until), now
                )
            )
        return result

    def today(self) -> LedgerPeriod:
        """Since midnight UTC, to now (live instances billed up to now)."""
        now = self._clock.now()
        midnight = datetime(now.year, now.month, now.day, tzinfo=UTC)
        return self.period(midnight, now + timedelta(seconds=1))

    def spent_today(self) -> Decimal:
        """The budget's reading."""
        return self.today().total

    def spent_today_by_team(self) -> dict[str, float]:
        """What each team's jobs cost today (their lines, waste on them included): the
        teams' spend per day in their quotas."""
        spent: dict[str, Decimal] = {}
        for line in self.today().lines:
            if line.tags is not None and line.tags.team is not None:
                spent[line.tags.team] = spent.get(line.tags.team, ZERO) + line.usd
        return {team: float(usd) for team, usd in spent.items()}

    def s3_usd(self, attempts: Sequence[AttemptSpan]) -> dict[str, Decimal]:
        """Each job's S3 requests: its checkpoints' and, once finished, its output's."""
        per_put = self.settings.s3_usd_per_1000_puts / 1000
        cost: dict[str, Decimal] = {}
        for span in attempts:
            puts = span.checkpoints * self.settings.puts_per_checkpoint
            if span.outcome == "succeeded":
                puts += self.settings.puts_per_output
            cost[span.job_id] = cost.get(span.job_id, ZERO) + puts * per_put
        return cost

    @staticmethod
    def _prices(
        life: InstanceLife,
        history: dict[PoolKey, list[tuple[datetime, Decimal]]],
        ebs: Decimal,
        incomplete: list[str],
    ) -> Prices:
        instance_type, zone, market = life.pool
        pool = f"{instance_type} in {zone} ({market})"
        on_demand = history.get((instance_type, zone, Market.ON_DEMAND)) or []
        own = history.get(life.pool) or []
        if not own and on_demand:
            incomplete.append(
                f"no price recorded for {pool}: {life.instance_id} is priced at the on-demand price"
            )
            own = on_demand
        elif not own:
            incomplete.append(f"no price recorded for {pool}: {life.instance_id} is priced at $0")
            own = [(life.launched_at, ZERO)]
        elif own[0][0] > life.launched_at + timedelta(hours=1):
            incomplete.append(
                f"prices of {pool} start after {life.instance_id} launched; "
                "the first one recorded is used before it"
            )
        list_price = on_demand[-1][1] if on_demand else own[-1][1]
        return Prices(PriceSchedule(tuple(own)), list_price, ebs)
