"""The alerting rules shipped in infra/alerts pass their promtool unit tests, and every metric
they read is one a FrameFleet process exports (a renamed metric would silence an alert)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from prometheus_client import CollectorRegistry

from autoscaler.metrics import AutoscalerMetrics
from orchestrator.control.plane_metrics import PlaneMetrics
from orchestrator.intake.metrics import IntakeMetrics
from orchestrator.interruptions.loop import InterruptionMetrics
from worker_ami.agent.metrics import WorkerMetrics
from worker_ami.agent.telemetry import NvmlUnavailable

ALERTS = Path(__file__).parents[1] / "infra" / "alerts"


def test_the_alert_rules_pass_their_promtool_tests() -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian's prometheus package; .ci/run installs it) is needed"
    checked = subprocess.run([promtool, "check", "rules", "framefleet.rules.yml"], cwd=ALERTS,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 7 rules found" in checked.stdout
    tested = subprocess.run([promtool, "test", "rules", "framefleet.rules.test.yml"], cwd=ALERTS,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_every_metric_an_alert_reads_is_exported() -> None:
    registry = CollectorRegistry()
    PlaneMetrics(registry)
    IntakeMetrics(registry)
    InterruptionMetrics(registry)
    AutoscalerMetrics(registry)
    WorkerMetrics(registry, gpus=lambda: NvmlUnavailable("no driver in the test"))
    exported = {sample.name for family in registry.collect() for sample in family.samples}
    # Labelled series appear once they move; their families name them before that.
    for family in registry.collect():
        exported.add(family.name + ("_total" if family.type == "counter" else ""))
    rules = (ALERTS / "framefleet.rules.yml").read_text()
    read = set(re.findall(r"\b(framefleet_[a-z_]+)", rules))
    assert read
    assert read <= exported, read - exported
