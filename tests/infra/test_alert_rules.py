"""The alerting rules shipped in infra/alerts pass their promtool unit tests, and every metric
they read is one a FrameFleet process exports (a renamed metric would silence an alert)."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from autoscaler.metrics import AutoscalerMetrics
from orchestrator.control.plane_metrics import PlaneMetrics
from orchestrator.intake.metrics import IntakeMetrics
from orchestrator.interruptions.loop import InterruptionMetrics
from tests.support.paths import INFRA
from tests.support.services import SERVICE_VARIABLES
from tests.support.terraform_support import console, infra_copy, init
from worker_ami.agent.metrics import WorkerMetrics
from worker_ami.agent.telemetry import NvmlUnavailable

ALERTS = INFRA / "alerts"


def test_the_alert_rules_pass_their_promtool_tests() -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian's prometheus package; .ci/run installs it) is needed"
    checked = subprocess.run(
        [promtool, "check", "rules", "framefleet.rules.yml"],
        cwd=ALERTS,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 8 rules found" in checked.stdout
    tested = subprocess.run(
        [promtool, "test", "rules", "framefleet.rules.test.yml"],
        cwd=ALERTS,
        capture_output=True,
        text=True,
        timeout=60,
    )
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


def test_each_rule_runs_where_the_deployment_ships_its_metrics(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Deployed, the rules run in the Prometheus workspace (modules/alarms loads this very file,
    its alert manager publishes to the alarm topic), and each metric a rule reads reaches the
    workspace: the collector beside the process that exports it scrapes that process (the
    control plane's collector also scrapes the workers)."""
    alarms = (INFRA / "modules" / "alarms" / "main.tf").read_text()
    assert (
        'file(coalesce(var.rules_file, "${path.module}/../../alerts/framefleet.rules.yml"))'
        in alarms
    )
    assert "sns_configs" in alarms
    assert "aws_sns_topic.alarms.arn" in alarms
    exporters: dict[str, list[Any]] = {
        "control-plane": [PlaneMetrics, IntakeMetrics, InterruptionMetrics],
        "autoscaler": [AutoscalerMetrics],
        "workers": [lambda r: WorkerMetrics(r, gpus=lambda: NvmlUnavailable("no driver"))],
    }
    exported_by: dict[str, str] = {}
    for process, makers in exporters.items():
        registry = CollectorRegistry()
        for make in makers:
            make(registry)
        for family in registry.collect():
            exported_by[family.name] = process
            exported_by[family.name + "_total"] = process
    module = infra_copy(tmp_path_factory.mktemp("tf")) / "modules" / "service"
    init(module)
    variables = SERVICE_VARIABLES | {
        "metrics_remote_write_url": "https://aps.example/api/v1/remote_write"
    }
    # Their known parts before an apply (the log group's name is not).
    known = (
        "{ for p, cs in local.collectors : p => [for c in cs : { environment = c.environment }] }"
    )
    collectors = console(module, known, variables)
    assert isinstance(collectors, dict)
    scraped: set[str] = set()
    for process, containers in collectors.items():
        [collector] = containers
        config = yaml.safe_load(collector["environment"][0]["value"])
        pipeline = config["service"]["pipelines"]["metrics"]
        assert pipeline["exporters"] == ["prometheusremotewrite"]
        assert config["exporters"]["prometheusremotewrite"]["endpoint"].startswith("https://aps.")
        for job in config["receivers"]["prometheus"]["config"]["scrape_configs"]:
            if job.get("static_configs") == [{"targets": ["127.0.0.1:9100"]}]:
                scraped.add(process)  # its own process, on the task's metrics port
            elif job.get("ec2_sd_configs"):
                assert job["ec2_sd_configs"][0]["port"] == 9400  # the workers' metrics_port
                scraped.add("workers")
    assert scraped == {"control-plane", "autoscaler", "workers"}
    for rule in yaml.safe_load((ALERTS / "framefleet.rules.yml").read_text())["groups"][0]["rules"]:
        for metric in re.findall(r"\b(framefleet_[a-z_]+)", rule["expr"]):
            assert exported_by.get(metric) in scraped, (rule["alert"], metric)
