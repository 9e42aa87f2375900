"""Two `framefleet autoscaler run` processes against one PostgreSQL and moto's EC2: only the
holder of the buying lease buys, so the queue's capacity is bought once; when the holder is
SIGKILLed (it releases nothing), the other takes over and buys nothing twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.ec2.ports import FLEET_TAG
from framefleet.local_ports import free_port
from kernel.clock import SystemClock
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head
from tests.support.jobs import job_dict
from tests.support.waits import wait_until

FLEET = "lease-test"
REPLICAS = ("as-1", "as-2")


def rounds(port: int) -> float:
    """The planning rounds a replica ran as the buyer (its /metrics)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as answer:
            text = answer.read().decode()
    except OSError:
        return -1.0  # not up yet, or killed
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "framefleet_autoscaler_rounds_total":
                return float(sample.value)
    return 0.0


def still_running(process: subprocess.Popen[bytes], log: Path) -> bool:
    """True while the replica runs; a replica that exited fails the test with its log's end."""
    if process.poll() is None:
        return True
    tail = log.read_text(errors="replace")[-3000:]
    raise AssertionError(f"{log.stem} exited with {process.returncode}:\n{tail}")


@pytest.fixture
def replicas(
    moto_endpoint: str, postgres_url: str, tmp_path: Path
) -> Iterator[dict[str, tuple[subprocess.Popen[bytes], int]]]:
    image = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_endpoint)
    image_id = image.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    started = {}
    for name in REPLICAS:
        port = free_port()
        env = {
            **os.environ,
            "FRAMEFLEET_ENDPOINT_URL": moto_endpoint,
            "FRAMEFLEET_DATABASE_URL": postgres_url,
            "FRAMEFLEET_CONTROL__LEASE_SECONDS": "2",
            "FRAMEFLEET_CONTROL__REPLICA_ID": name,
            "FRAMEFLEET_AUTOSCALER__FLEET_ID": FLEET,
            "FRAMEFLEET_AUTOSCALER__LAUNCH_TEMPLATE": "framefleet-lease-test",
            "FRAMEFLEET_AUTOSCALER__IMAGE_ID": image_id,
            "FRAMEFLEET_AUTOSCALER__ZONES": '["us-east-1a"]',
            "FRAMEFLEET_AUTOSCALER__CANDIDATE_TYPES": '["g5.xlarge"]',
            "FRAMEFLEET_AUTOSCALER__INTERVAL_SECONDS": "0.2",
            "FRAMEFLEET_AUTOSCALER__ADVISOR_URL": (tmp_path / "offline.json").as_uri(),
            "FRAMEFLEET_AUTOSCALER__METRICS_PORT": str(port),
        }
        with (tmp_path / f"{name}.log").open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "framefleet", "autoscaler", "run"],
                env=env,
                stdout=log,
                stderr=log,
            )
        started[name] = (process, port)
    yield started
    for process, _ in started.values():
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=30)


def test_one_replica_buys_and_a_successor_buys_nothing_twice(
    moto_endpoint: str,
    postgres_url: str,
    replicas: dict[str, tuple[subprocess.Popen[bytes], int]],
    tmp_path: Path,
) -> None:
    engine = make_engine(postgres_url)
    upgrade_to_head(engine)
    store = JobStore(engine, SystemClock())
    store.intake.accept_batch(
        [Submission(parse_job(job_dict(f"lease-{i}", seed=i), now=None), f"m{i}") for i in range(2)]
    )
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_endpoint)

    def bought() -> int:
        found = ec2.describe_instances(
            Filters=[
                {"Name": f"tag:{FLEET_TAG}", "Values": [FLEET]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ]
        )
        return sum(len(r["Instances"]) for r in found["Reservations"])

    wait_until(lambda: bought() >= 2, 90, "the queue's capacity")
    holder = store.leases.lease_holder("autoscaler")
    assert holder is not None
    dead, standby = holder[0], next(name for name in REPLICAS if name != holder[0])
    # Five rounds of the buyer later, still one instance per queued job.
    after = rounds(replicas[dead][1]) + 5
    wait_until(lambda: rounds(replicas[dead][1]) >= after, 30, "five more rounds")
    assert bought() == 2
    # The standby bought nothing: no round as the buyer (-1: its /metrics not up yet, on a
    # busy machine; the instance count above already shows nothing more was bought).
    assert rounds(replicas[standby][1]) <= 0
    # The holder dies without a word, its lease still held; the other takes over.
    replicas[dead][0].send_signal(signal.SIGKILL)
    replicas[dead][0].wait(timeout=30)
    # The lease runs out in 2 s. A standby that never claimed it on a loaded machine had most
    # likely died at start: its /metrics port, drawn from the ephemeral range, was taken by an
    # outgoing connection (framefleet/local_ports.py now draws below that range). A dead standby
    # now fails here with its log instead of a bare timeout.
    standby_process, standby_log = replicas[standby][0], tmp_path / f"{standby}.log"
    wait_until(
        lambda: (
            still_running(standby_process, standby_log)
            and (store.leases.lease_holder("autoscaler") or ("",))[0] == standby
        ),
        60,
        "the standby to hold the buying lease",
    )
    successor = store.leases.lease_holder("autoscaler")
    assert successor is not None
    assert successor[1] > holder[1]  # a new fence: the dead holder's writes would fail
    wait_until(lambda: rounds(replicas[standby][1]) >= 5, 30, "the successor's five rounds")
    assert bought() == 2
    store.dispose()
