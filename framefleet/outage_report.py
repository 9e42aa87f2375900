"""What a process's outages look like from outside (issue 48): a metric per dependency
(`framefleet_outage_ongoing` 1 while a loop cannot reach it, `framefleet_outages_total` how
often that began, `framefleet_loop_restarts_total` how often a loop raised and was started
again) and a readiness check that fails, naming each dependency out and since when, while any
is. Both read the process's `OutageBoard` when asked, so nothing is updated on a loop's path."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from framefleet.health_server import ReadinessCheck
from kernel.outage import PROCESS_OUTAGES, OutageBoard


class OutageCollector(Collector):
    def __init__(self, board: OutageBoard) -> None:
        self._board = board

    def collect(self) -> Iterator[Metric]:
        ongoing = self._board.ongoing()
        out = GaugeMetricFamily(
            "framefleet_outage_ongoing",
            "1 while a loop of this process cannot reach the dependency (it retries)",
            labels=["dependency"],
        )
        began = CounterMetricFamily(
            "framefleet_outages",
            "Outages of a dependency this process's loops have seen begin",
            labels=["dependency"],
        )
        for dependency, count in sorted(self._board.begun.items()):
            out.add_metric([dependency], 1.0 if dependency in ongoing else 0.0)
            began.add_metric([dependency], float(count))
        restarts = CounterMetricFamily(
            "framefleet_loop_restarts",
            "Times a loop of this process raised and was started again",
            labels=["loop"],
        )
        for loop, count in sorted(self._board.restarts.items()):
            restarts.add_metric([loop], float(count))
        yield from (out, began, restarts)


def report_outages(
    registry: CollectorRegistry, board: OutageBoard = PROCESS_OUTAGES
) -> ReadinessCheck:
    """Register the outage metrics on `registry`; the readiness check that goes with them."""
    registry.register(OutageCollector(board))

    async def no_outage() -> None:
        ongoing = board.ongoing()
        if ongoing:
            raise ConnectionError(
                "; ".join(
                    f"{dependency} out since {since:%Y-%m-%d %H:%M:%S}"
                    for dependency, since in sorted(ongoing.items())
                )
            )

    return no_outage
