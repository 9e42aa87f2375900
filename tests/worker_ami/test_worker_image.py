"""The worker image's parts check with the tools a user would build it with: the Packer
template validates (syntax: Debian's Packer 1.6 has no plugin registry to reach, and builds
nothing here), every shell script passes shellcheck, and the systemd units pass
`systemd-analyze verify` (their executables stubbed at a scratch path, since /opt/framefleet is
the image's, not this machine's)."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from tests.support.paths import ROOT

UNITS = sorted((ROOT / "worker_ami" / "systemd").glob("*.service"))
SCRIPTS = sorted([*ROOT.glob("worker_ami/**/*.sh"), *ROOT.glob("infra/**/*.sh")])


def tool(name: str) -> str:
    found = shutil.which(name)
    assert found, f"{name} is needed (Debian's package; .ci/run installs it)"
    return found


def run(*command: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_packer_template_validates() -> None:
    checked = run(tool("packer"), "validate", "-syntax-only", "worker_ami/packer/worker.pkr.hcl")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    template = (ROOT / "worker_ami" / "packer" / "worker.pkr.hcl").read_text()
    assert 'http_tokens                 = "required"' in template  # IMDSv2 only
    assert "encrypted             = true" in template


def test_the_provisioning_installs_a_python_its_base_has_and_checks_the_gpu() -> None:
    script = (ROOT / "worker_ami" / "packer" / "provision.sh").read_text()
    assert "ppa:deadsnakes/ppa" in script  # Ubuntu 24.04 ships 3.12 only
    assert "python3.11 --version" in script
    assert "torch.cuda.is_available()" in script


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_shell_script_passes_shellcheck(script: Path) -> None:
    checked = run(tool("shellcheck"), str(script))
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_every_systemd_unit_verifies(unit: Path, tmp_path: Path) -> None:
    stub = tmp_path / "framefleet-worker"
    stub.write_text("#!/bin/sh\n")
    stub.chmod(0o755)
    copy = tmp_path / unit.name
    copy.write_text(
        unit.read_text().replace("/opt/framefleet/venv/bin/framefleet-worker", str(stub))
    )
    checked = run(tool("systemd-analyze"), "verify", str(copy), cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Restart=on-failure" in unit.read_text() or "Type=oneshot" in unit.read_text()


def test_the_agent_wheel_reaches_the_image_under_its_own_file_name() -> None:
    """pip reads a wheel's version and tags from its file name and refuses any other name: the
    file Packer copies must keep the wheel's name, and provision.sh install that very file."""
    template = ROOT / "worker_ami" / "packer" / "worker.pkr.hcl"
    console = subprocess.run(
        [tool("packer"), "console", str(template)],
        input='"/tmp/${basename(var.framefleet_wheel)}"\n',
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert console.returncode == 0, console.stderr
    copied = Path(console.stdout.strip().strip('"'))
    name, version, *_ = parse_wheel_filename(copied.name)
    assert (name, str(version)) == ("framefleet", project_version())
    with pytest.raises(InvalidWheelFilename):
        parse_wheel_filename("framefleet.whl")  # the name the image used to get
    packer = template.read_text()
    assert 'destination = "/tmp/${basename(var.framefleet_wheel)}"' in packer
    assert '"FRAMEFLEET_WHEEL=/tmp/${basename(var.framefleet_wheel)}"' in packer
    provision = (ROOT / "worker_ami" / "packer" / "provision.sh").read_text()
    assert 'pip install "${FRAMEFLEET_WHEEL:?' in provision


def project_version() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return str(project["version"])
