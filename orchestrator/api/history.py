"""The console's "what happened" page, built from the store's facts (no I/O here): over a date
range in equal buckets, the jobs in each state, the fleet by market, what the fleet cost per
hour, the interruptions and terminations, and the deadlines missed; and the spend per day."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

from kernel.job_state import JobState
from kernel.market import Market
from orchestrator.costs.money import ZERO, cents
from orchestrator.store.cost_facts import InstanceLife, PoolKey
from orchestrator.store.history_facts import DeadlineOutcome, StateMove
from orchestrator.store.job_pages import GoneInstance

BUCKETS = 48


@dataclass(frozen=True)
class HistoryPoint:
    """The state of things at the end of one bucket, and what happened within it."""

    at: datetime
    jobs: Mapping[JobState, int]
    instances: Mapping[Market, int]
    usd_per_hour: Decimal  # the live fleet's price at `at`, in cents
    interruptions: int  # instances gone within the bucket (interrupted or terminated)
    deadline_misses: int  # deadlines within the bucket their jobs missed


@dataclass(frozen=True)
class HistoryView:
    since: datetime
    until: datetime
    step: timedelta
    points: list[HistoryPoint]
    spend_per_day: list[tuple[date, Decimal]]  # cents, as the report's table by day


def bucket_ends(since: datetime, until: datetime, count: int = BUCKETS) -> list[datetime]:
    step = (until - since) / count
    return [since + step * (i + 1) for i in range(count)]


def states_at(moves: Sequence[StateMove], ends: Sequence[datetime]) -> list[Counter[JobState]]:
    """How many jobs were in each state at each moment (`moves` oldest first)."""
    state: dict[str, JobState] = {}
    counts: list[Counter[JobState]] = []
    index = 0
    for end in ends:
        while index < len(moves) and moves[index].at <= end:
            state[moves[index].job_id] = moves[index].to_state
            index += 1
        counts.append(Counter(state.values()))
    return counts


def _alive(life: InstanceLife, moment: datetime) -> bool:
    return life.launched_at <= moment and (life.ended_at is None or life.ended_at > moment)


def price_at(changes: Sequence[tuple[datetime, Decimal]], moment: datetime) -> Decimal:
    """The last price set at or before `moment` (zero before the first)."""
    index = bisect.bisect_right([at for at, _ in changes], moment)
    return changes[index - 1][1] if index else ZERO


def history_view(
    since: datetime,
    until: datetime,
    moves: Sequence[StateMove],
    lives: Sequence[InstanceLife],
    prices: Mapping[PoolKey, Sequence[tuple[datetime, Decimal]]],
    gone: Sequence[GoneInstance],
    deadlines: Sequence[DeadlineOutcome],
    by_day_market: Mapping[tuple[date, Market], Decimal],
    now: datetime,
) -> HistoryView:
    ends = bucket_ends(since, until)
    step = ends[0] - since
    states = states_at(moves, ends)
    points = []
    for end, jobs in zip(ends, states, strict=True):
        start = end - step
        alive = [life for life in lives if _alive(life, end)]
        points.append(
            HistoryPoint(
                at=end,
                jobs=dict(jobs),
                instances=dict(Counter(life.pool[2] for life in alive)),
                usd_per_hour=cents(
                    sum((price_at(prices.get(life.pool, ()), end) for life in alive), ZERO)
                ),
                interruptions=sum(1 for g in gone if start <= g.gone_at < end),
                deadline_misses=sum(
                    1 for d in deadlines if start <= d.deadline < end and missed(d, now)
                ),
            )
        )
    days: dict[date, Decimal] = {}
    for (day, _market), usd in sorted(by_day_market.items()):
        days[day] = days.get(day, ZERO) + usd
    return HistoryView(since, until, step, points, sorted(days.items()))


def missed(outcome: DeadlineOutcome, now: datetime) -> bool:
    """Done late or not done well, or still unfinished past it."""
    if outcome.finished_at is None:
        return now > outcome.deadline
    return outcome.state is not JobState.SUCCEEDED or outcome.finished_at > outcome.deadline


@dataclass(frozen=True)
class Column:
    at: datetime
    segments: list[tuple[str, float]]  # stacked from the bottom: (series, value)
    label: str  # what the column's tooltip says

    @property
    def total(self) -> float:
        return sum(value for _, value in self.segments)


@dataclass(frozen=True)
class Chart:
    id: str
    title: str
    legend: list[str]  # the series, bottom first
    columns: list[Column]

    @property
    def peak(self) -> float:
        return max([1.0, *(column.total for column in self.columns)])


GONE, MISSED = "instances gone", "deadlines missed"
SHOWN_STATES = (
    JobState.QUEUED,
    JobState.ASSIGNED,
    JobState.RUNNING,
    JobState.CHECKPOINTING,
    JobState.PREEMPTED,
)


def charts(view: HistoryView) -> list[Chart]:
    """The page's charts: queue depth by state, the fleet by market, its price per hour,
    interruptions with deadline misses, and the spend per day."""
    points = view.points

    def column(point: HistoryPoint, values: Mapping[str, float]) -> Column:
        label = ", ".join(f"{name} {value:g}" for name, value in values.items())
        return Column(point.at, list(values.items()), label)

    return [
        Chart(
            "queue-depth",
            "Jobs waiting and running, by state",
            [state.value for state in SHOWN_STATES],
            [column(p, {s.value: p.jobs.get(s, 0) for s in SHOWN_STATES}) for p in points],
        ),
        Chart(
            "fleet-size",
            "Instances, by market",
            [market.value for market in Market],
            [column(p, {m.value: p.instances.get(m, 0) for m in Market}) for p in points],
        ),
        Chart(
            "usd-per-hour",
            "What the fleet cost per hour (USD)",
            ["USD per hour"],
            [column(p, {"USD per hour": float(p.usd_per_hour)}) for p in points],
        ),
        Chart(
            "interruptions",
            "Instances interrupted or terminated, and deadlines missed",
            [GONE, MISSED],
            [
                column(
                    p, {"instances gone": p.interruptions, "deadlines missed": p.deadline_misses}
                )
                for p in points
            ],
        ),
        Chart(
            "spend-per-day",
            "Spend per day (USD)",
            ["USD"],
            [
                Column(
                    datetime.combine(day, datetime.min.time(), tzinfo=view.since.tzinfo),
                    [("USD", float(usd))],
                    f"{day}: ${usd:,.2f}",
                )
                for day, usd in view.spend_per_day
            ],
        ),
    ]
