"""The services as ECS runs them: a read-only root file system, the task's scratch volume the
one place they write. Their environment is Terraform's own rendering of the service module's
task definition; the finance report, run with it under a read-only root (a mount namespace of
its own, `unshare`), writes its charts and files there. Without the scratch settings the same
run fails, as it did in a deployment."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernel.clock import FakeClock
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from tests.support.fleet_history import FleetHistory, a_day_of_work
from tests.support.services import SCRATCH, SERVICE_VARIABLES
from tests.support.terraform_support import console, infra_copy, init


@pytest.fixture(scope="module")
def containers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    module = infra_copy(tmp_path_factory.mktemp("tf")) / "modules" / "service"
    init(module)
    # Their parts known before an apply (the log group's name is not).
    known = (
        "{ for process, c in local.containers : process => { "
        "readonlyRootFilesystem = c.readonlyRootFilesystem, mountPoints = c.mountPoints, "
        "healthCheck = c.healthCheck, environment = c.environment } }"
    )
    rendered = console(module, known, SERVICE_VARIABLES)
    assert isinstance(rendered, dict)
    return rendered


def test_each_task_writes_only_to_its_scratch_volume(
    containers: dict[str, dict[str, object]],
) -> None:
    """Its process writes to the scratch volume alone; ECS Exec's agent (not our process) to
    three volumes of its own, so that the root stays read-only."""
    assert set(containers) == {"control-plane", "autoscaler"}
    for container in containers.values():
        assert container["readonlyRootFilesystem"] is True
        mounts = container["mountPoints"]
        assert isinstance(mounts, list)
        assert mounts[0] == {"sourceVolume": "scratch", "containerPath": SCRATCH, "readOnly": False}
        assert {m["containerPath"] for m in mounts[1:]} == {
            "/managed-agents",
            "/var/lib/amazon/ssm",
            "/var/log/amazon/ssm",
        }
        health = container["healthCheck"]
        assert isinstance(health, dict)
        assert "/healthz" in " ".join(health["command"])


def test_the_finance_report_runs_under_a_read_only_root(
    containers: dict[str, dict[str, object]], tmp_path: Path
) -> None:
    environment = containers["control-plane"]["environment"]
    assert isinstance(environment, list)
    task_env = {item["name"]: item["value"] for item in environment}
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    database = f"sqlite:///{scratch}/framefleet.db"
    store = JobStore(make_engine(database), FakeClock())
    store.upgrade()
    day, end = a_day_of_work(FleetHistory(store, FakeClock()))
    store.dispose()
    # The task's environment, its scratch paths where this test's scratch folder is.
    scratched = {
        k: v.replace(SCRATCH, str(scratch)) for k, v in task_env.items() if v.startswith(SCRATCH)
    }
    assert set(scratched) == {"TMPDIR", "MPLCONFIGDIR", "FRAMEFLEET_COSTS__REPORT_DIR"}
    report = ["report", "--since", day.isoformat(), "--until", end.isoformat(), "--no-email"]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TMPDIR", "MPL"))}
    base |= {"FRAMEFLEET_DATABASE_URL": database, "HOME": str(scratch)}
    done = read_only_root(scratch, report, base | scratched)
    assert done.returncode == 0, done.stdout + done.stderr
    assert list((scratch / "reports").rglob("report.html"))
    # Without the scratch settings (the task definition before): the run cannot write.
    failed = read_only_root(scratch, report, base | {"HOME": "/root"})
    assert failed.returncode != 0
    assert "writable" in failed.stderr, failed.stderr[-2000:]  # matplotlib's cache, as deployed


def read_only_root(
    scratch: Path, arguments: list[str], env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """`framefleet ARGUMENTS` in a mount namespace whose root is read-only but `scratch`."""
    unshare = shutil.which("unshare")
    assert unshare, "unshare (util-linux) is needed"
    framefleet = Path(sys.executable).with_name("framefleet")
    script = (
        f'mount --bind "{scratch}" "{scratch}" && mount --bind / / '
        '&& mount -o remount,bind,ro / && cd / && exec "$@"'
    )
    return subprocess.run(
        [
            unshare,
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            "sh",
            str(framefleet),
            *arguments,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
