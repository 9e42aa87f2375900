"""Terraform checked by Terraform: `terraform init` from the machine's provider mirror and
`terraform validate` on every module and the example; the workers' user data rendered by
Terraform's own `templatefile` (as the launch template renders it) passes shellcheck."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.support.paths import INFRA
from tests.support.terraform_support import infra_copy, init, templatefile, terraform

ROOTS = sorted(
    [p.relative_to(INFRA) for p in (INFRA / "modules").iterdir() if (p / "main.tf").exists()]
    + [Path("examples") / "complete"]
)
USER_DATA_VALUES = {
    "region": "us-east-1",
    "broker_host": "broker.framefleet.internal",
    "broker_port": 8883,
    "broker_tls": True,
    "credentials_path": "/framefleet/workers",
    "checkpoint_bucket": "framefleet-data",
    "model_registry": "s3://framefleet-data/models/registry.json",
    "warm_models": "wan/wan2.1-t2v-1.3b",
    "max_checkpoint_interval": 600,
    "metrics_port": 9400,
    "jobs_per_gpu": 1,
    "mig_slots": True,
}


def test_every_module_and_the_example_validate(tmp_path: Path) -> None:
    infra = infra_copy(tmp_path)
    problems = []
    for root in ROOTS:
        folder = infra / root
        init(folder)
        checked = terraform(folder, "validate")
        if checked.returncode != 0:
            problems.append(f"{root}:\n{checked.stdout}{checked.stderr}")
    assert problems == []


def test_terraforms_own_rendering_of_the_user_data_passes_shellcheck(tmp_path: Path) -> None:
    template = INFRA / "modules" / "worker_fleet" / "user-data.sh.tftpl"
    rendered = templatefile(template, USER_DATA_VALUES)
    assert rendered.startswith("#!/usr/bin/env bash")
    assert "REGION='us-east-1'" in rendered
    assert 'ROOT="${FRAMEFLEET_ROOT:-}"' in rendered  # the shell's own braces left to it
    script = tmp_path / "user-data.sh"
    script.write_text(rendered)
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is needed (Debian's shellcheck)"
    checked = subprocess.run([shellcheck, str(script)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
