"""Intake counters (prometheus-client), on a registry the composition root hands in."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram


class IntakeMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry
        self.messages = Counter(
            "framefleet_intake_messages",
            "Job messages handled, by outcome (accepted, duplicate, dead_lettered)",
            ["outcome"],
            registry=registry,
        )
        self.dead_lettered = Counter(
            "framefleet_intake_dead_lettered",
            "Messages sent to the dead-letter queue, by reason",
            ["reason"],
            registry=registry,
        )
        self.visibility_extensions = Counter(
            "framefleet_intake_visibility_extensions",
            "Times a slow batch had its visibility timeout extended",
            registry=registry,
        )
        self.errors = Counter(
            "framefleet_intake_errors",
            "Batches that failed and were left for redelivery, by error type",
            ["kind"],
            registry=registry,
        )
        self.batch_seconds = Histogram(
            "framefleet_intake_batch_seconds",
            "Time from receive to delete of one batch",
            registry=registry,
        )

    def value(self, name: str, **labels: str) -> float:
        return self._registry.get_sample_value(name, labels) or 0.0

    def outcome(self, outcome: str) -> int:
        return int(self.value("framefleet_intake_messages_total", outcome=outcome))
