"""The root module a deployment calls (issue 51): the example is one call of it; every module's
README has its inputs and outputs tables as its variables and outputs are now; the settings
table it checks its `settings` input against is the settings' own; and a `terraform plan` with
a setting that does not exist, or of the wrong kind, fails naming it, before any AWS call."""

from __future__ import annotations

import json
from pathlib import Path

from framefleet.settings_table import settings_table
from tests.support.paths import INFRA
from tests.support.terraform_support import infra_copy, init, terraform
from tools import terraform_docs
from tools.terraform_docs import parsed

# The example's inputs for a plan that stops at the variables' validation.
INPUTS = {
    "bucket_name": "acme-framefleet",
    "vpc_id": "vpc-0123456789abcdef0",
    "private_subnet_ids": ["subnet-0123456789abcdef0"],
    "image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/framefleet:1",
    "worker_ami_id": "ami-0123456789abcdef0",
    "broker_image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/broker:1",
    "broker_domain": "mqtt.example.com",
    "broker_certificate_arn": "arn:aws:acm:us-east-1:123456789012:certificate/x",
    "broker_admin_secret_arn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:a",
    "control_plane_broker_secret_arn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:b",
    "report_sender": "costs@example.com",
}
# Nothing listens there: a plan that reached AWS would fail otherwise than the checks expect.
NOWHERE = """provider "aws" {
  region                      = var.region
  access_key                  = "none"
  secret_key                  = "none"
  skip_credentials_validation = true
  skip_metadata_api_check     = true
  skip_requesting_account_id  = true
  endpoints {
    sts = "http://127.0.0.1:9"
    ec2 = "http://127.0.0.1:9"
  }
}
"""


def test_the_example_is_one_call_of_the_root_module() -> None:
    example = parsed(INFRA / "examples" / "complete" / "main.tf")
    assert {key for key in example if not key.startswith("__")} == {"module"}
    [(name, call)] = [item for block in example["module"] for item in block.items()]
    assert name == "framefleet"
    assert call["source"] == "../../modules/framefleet"
    module_inputs = {
        name
        for block in parsed(INFRA / "modules" / "framefleet" / "variables.tf")["variable"]
        for name in block
    }
    assert set(call) - {"source"} <= module_inputs


def test_every_module_readme_lists_its_inputs_and_outputs() -> None:
    assert terraform_docs.main(["--check"]) == 0
    for module in terraform_docs.modules():
        readme = (module / "README.md").read_text()
        for block in parsed(module / "variables.tf").get("variable", []):
            for name in block:
                assert f"| `{name}` |" in readme, (module.name, name)


def test_the_settings_table_is_the_settings_own() -> None:
    stored = json.loads((INFRA / "modules" / "framefleet" / "settings.json").read_text())
    assert stored == settings_table(), "regenerate: framefleet schema --of settings --output ..."
    assert stored["settings"]["autoscaler.budget_per_day"] == {"kind": "number"}
    assert stored["settings"]["log_format"] == {"kind": "enum", "values": ["text", "json"]}


def test_a_bad_setting_fails_the_plan_naming_it(tmp_path: Path) -> None:
    folder = infra_copy(tmp_path) / "examples" / "complete"
    (folder / "nowhere_override.tf").write_text(NOWHERE)
    settings = {
        "autoscaler.budget_per_dayy": "40",  # a typo
        "metrics_port": "ninety",  # not an integer
        "log_format": "xml",  # not one of its values
        "control.scheduling.team_quotas": "{not json",
        "autoscaler.budget_per_day": "40",  # fine
    }
    call = {"module": {"framefleet": {"settings": settings}}}
    (folder / "settings_override.tf.json").write_text(json.dumps(call))
    (folder / "terraform.tfvars.json").write_text(json.dumps(INPUTS))
    init(folder)
    planned = terraform(folder, "plan", "-input=false", "-refresh=false", "-no-color")
    said = " ".join((planned.stdout + planned.stderr).split())
    assert planned.returncode != 0
    assert "Not FrameFleet settings: autoscaler.budget_per_dayy" in said
    assert 'metrics_port wants integer, not "ninety"' in said
    assert 'log_format wants text or json, not "xml"' in said
    assert "control.scheduling.team_quotas wants json" in said
    assert "autoscaler.budget_per_day wants" not in said
