"""The inputs and outputs tables of each Terraform module's README, written from its
`variables.tf` and `outputs.tf` (python-hcl2 reads them; terraform-docs, the usual tool, is a
Go binary this project's machines do not have). Between the README's markers only: the prose
above them is written by hand.

    python -m tools.terraform_docs           # write every module's README
    python -m tools.terraform_docs --check   # exit 1 naming each README that is stale
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import hcl2

MODULES = Path(__file__).resolve().parent.parent / "infra" / "modules"
BEGIN = "<!-- BEGIN GENERATED: python -m tools.terraform_docs -->"
END = "<!-- END GENERATED -->"


def parsed(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as source:
        tree = unquoted(hcl2.load(source))
    assert isinstance(tree, dict)
    return tree


def unquoted(value: Any) -> Any:
    """python-hcl2 keeps the quotes of labels and string literals; the readers want values."""
    if isinstance(value, dict):
        return {unquoted(k): unquoted(v) for k, v in value.items() if k != "__is_block__"}
    if isinstance(value, list):
        return [unquoted(v) for v in value]
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _expression(value: Any) -> str:
    """A type or default as Terraform spells it (`${...}` interpolation unwrapped)."""
    if isinstance(value, str):
        return value[2:-1] if value.startswith("${") and value.endswith("}") else json.dumps(value)
    return json.dumps(value)


def tables(module: Path) -> str:
    """The generated part of `module`'s README."""
    lines = [BEGIN, "", "## Inputs", ""]
    variables = parsed(module / "variables.tf").get("variable", [])
    lines += ["| name | type | default | description |", "|---|---|---|---|"]
    for block in variables:
        for name, body in block.items():
            default = "(required)" if "default" not in body else _expression(body["default"])
            kind = str(body.get("type", "any")).removeprefix("${").removesuffix("}")
            description = body.get("description", "")
            lines.append(
                f"| `{name}` | `{_cell(kind)}` | `{_cell(default)}` | {_cell(description)} |"
            )
    lines += ["", "## Outputs", "", "| name | description |", "|---|---|"]
    outputs = (
        parsed(module / "outputs.tf").get("output", []) if (module / "outputs.tf").exists() else []
    )
    for block in outputs:
        for name, body in block.items():
            lines.append(f"| `{name}` | {_cell(body.get('description', ''))} |")
    return "\n".join([*lines, "", END]) + "\n"


def written(module: Path) -> str:
    """The module's README with its tables as they are now."""
    readme = module / "README.md"
    current = readme.read_text() if readme.exists() else f"# The `{module.name}` module\n\n"
    before = current.split(BEGIN)[0].rstrip() + "\n\n"
    after = current.split(END, 1)[1].lstrip("\n") if END in current else ""
    return before + tables(module) + (("\n" + after) if after else "")


def modules() -> list[Path]:
    return sorted(p for p in MODULES.iterdir() if (p / "variables.tf").exists())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools.terraform_docs")
    parser.add_argument("--check", action="store_true", help="exit 1 if a README is stale")
    args = parser.parse_args(argv)
    stale = []
    for module in modules():
        readme = module / "README.md"
        fresh = written(module)
        if readme.exists() and readme.read_text() == fresh:
            continue
        if args.check:
            stale.append(f"{readme}: stale (python -m tools.terraform_docs)")
        else:
            readme.write_text(fresh)
    for line in stale:
        print(line)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
