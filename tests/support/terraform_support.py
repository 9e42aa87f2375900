"""Terraform run by the tests, offline: the AWS provider from the machine's plugin mirror
(`terraform init -plugin-dir`, nothing downloaded), on a copy of infra/ in a temp folder (init
writes its lock file and `.terraform/` beside the configuration)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from tests.support.paths import INFRA

# Where the provider mirror lies on the developers' machines and CI's; FRAMEFLEET_TF_PLUGIN_DIR
# names another.
PLUGIN_DIRS = (Path("/opt/tf-plugins"), Path.home() / ".terraform.d" / "plugins")
PROVIDER = Path("registry.terraform.io") / "hashicorp" / "aws"


def plugin_dir() -> Path:
    named = os.environ.get("FRAMEFLEET_TF_PLUGIN_DIR")
    for folder in ([Path(named)] if named else []) + list(PLUGIN_DIRS):
        if (folder / PROVIDER).is_dir():
            return folder
    raise AssertionError(f"no Terraform AWS provider mirror in {PLUGIN_DIRS}")


def terraform(folder: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("terraform")
    assert binary, "terraform is needed (Terraform 1.9 or newer on the PATH)"
    config = folder / ".terraformrc"
    config.touch()
    env = {
        **os.environ,
        "TF_CLI_CONFIG_FILE": str(config),  # no user configuration, no network mirror
        "CHECKPOINT_DISABLE": "1",  # no version check over the network
        "TF_IN_AUTOMATION": "1",
    }
    return subprocess.run(
        [binary, args[0], "-no-color", *args[1:]],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def init(folder: Path) -> None:
    done = terraform(
        folder, "init", "-backend=false", "-input=false", f"-plugin-dir={plugin_dir()}"
    )
    assert done.returncode == 0, done.stdout + done.stderr


def infra_copy(destination: Path) -> Path:
    """infra/ copied (without anything an earlier init left there)."""
    target = destination / "infra"
    shutil.copytree(INFRA, target, ignore=shutil.ignore_patterns(".terraform*"))
    return target


def templatefile(template: Path, values: Mapping[str, object]) -> str:
    """What Terraform's own `templatefile` renders (an output of a configuration of nothing
    else, applied to a local state)."""
    with tempfile.TemporaryDirectory(prefix="framefleet-tf-") as name:
        folder = Path(name)
        (folder / "main.tf").write_text(
            'variable "template" {\n  type = string\n}\n'
            'variable "values" {\n  type = any\n}\n'
            'output "rendered" {\n  value = templatefile(var.template, var.values)\n}\n'
        )
        (folder / "terraform.tfvars.json").write_text(
            json.dumps({"template": str(template), "values": dict(values)})
        )
        for step in (("init", "-input=false"), ("apply", "-auto-approve", "-input=false")):
            done = terraform(folder, *step)
            assert done.returncode == 0, done.stdout + done.stderr
        rendered = terraform(folder, "output", "-raw", "rendered")
        assert rendered.returncode == 0, rendered.stderr
        return rendered.stdout


def console(folder: Path, expression: str, variables: Mapping[str, object]) -> object:
    """A JSON-encodable expression evaluated by `terraform console` in an initialised
    configuration with these variables."""
    var_file = folder / "console.tfvars.json"
    var_file.write_text(json.dumps(dict(variables)))
    binary = shutil.which("terraform")
    assert binary
    config = folder / ".terraformrc"
    config.touch()
    done = subprocess.run(
        [binary, "console", f"-var-file={var_file}"],
        input=f"jsonencode({expression})\n",
        cwd=folder,
        env={**os.environ, "TF_CLI_CONFIG_FILE": str(config), "CHECKPOINT_DISABLE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    printed = [line for line in done.stdout.splitlines() if line.strip()][-1]
    # The console prints the JSON text as an HCL string: its quotes and escapes are JSON's,
    # but for the template sequences it doubles.
    text = json.loads(printed).replace("$${", "${").replace("%%{", "%{")
    return json.loads(text)
