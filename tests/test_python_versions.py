"""Python versions (issue 51): FrameFleet is tested on 3.11, the Python of the machines here and
of CI (torch's CPU wheel on their disk is built for it), and declares that alone. What can be
checked of 3.12 and 3.13 without their wheels is checked where those interpreters are installed
(pyenv's, on the machines here), so that nothing stands in the way of declaring them once
their suites run: every source file compiles under them, and the producers' client (its own
package, the standard library only, for Python 3.10 and later) imports under each."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PACKAGES = ("kernel", "orchestrator", "autoscaler", "simulator", "worker_ami", "framefleet")


def interpreter(version: str) -> str:
    """pyenv's build of `version` (its shim runs only the versions it is told to), else one
    on the PATH."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    builds = sorted(root.glob(f"{version}.*/bin/python{version}"))
    found = str(builds[-1]) if builds else shutil.which(f"python{version}")
    if found is None:
        pytest.skip(f"python{version} is not installed here")
    probe = subprocess.run(
        [found, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
    )
    if probe.returncode != 0:  # a pyenv shim of a version pyenv does not have
        pytest.skip(f"python{version}: {probe.stderr.strip()[:200]}")
    return found


@pytest.mark.parametrize("version", ["3.12", "3.13"])
def test_every_source_file_compiles_under_newer_pythons(version: str, tmp_path: Path) -> None:
    python = interpreter(version)
    folders = [str(ROOT / name) for name in PACKAGES] + [str(ROOT / "client")]
    compiled = subprocess.run(
        [python, "-m", "compileall", "-q", "-f", "-x", r"[\\/]\.venv", *folders],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPYCACHEPREFIX": str(tmp_path)},  # the checkout's caches stay 3.11's
    )
    assert compiled.returncode == 0, compiled.stdout[-3000:] + compiled.stderr[-3000:]
    sources = [f for name in folders for f in Path(name).rglob("*.py") if ".venv" not in f.parts]
    mirrored = tmp_path / str(ROOT).lstrip("/")
    assert len(list(mirrored.rglob("*.pyc"))) == len(sources)  # every module compiled


@pytest.mark.parametrize("version", ["3.12", "3.13"])
def test_the_client_runs_under_newer_pythons(version: str) -> None:
    python = interpreter(version)
    script = (
        "import framefleet_client, framefleet_client.notices as n, sys;"
        "assert n.verify is not None; print(sys.version_info[:2])"
    )
    ran = subprocess.run(
        [python, "-I", "-c", f"import sys; sys.path.insert(0, {str(ROOT / 'client')!r}); {script}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert version.replace(".", ", ") in ran.stdout


def test_the_declared_range_holds_this_python() -> None:
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert declared["requires-python"] == ">=3.11,<3.12"  # what the suite runs on
    assert sys.version_info[:2] == (3, 11)
