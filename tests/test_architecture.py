"""The README's table of floors says what the import contracts in pyproject.toml enforce."""

from __future__ import annotations

import re
import tomllib

from tests.support.paths import ROOT


def test_the_readme_floors_are_the_import_contracts() -> None:
    linter = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contracts = {c["id"]: c for c in linter["contracts"]}
    layers = contracts["floors"]["layers"]  # top floor first
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("<!-- floors:") : readme.index("<!-- /floors -->")]
    rows = [line for line in table.splitlines() if re.match(r"\| \d", line)]
    cells = [re.split(r"(?<!\\)\|", row) for row in rows]  # a `\|` stays in its cell
    documented = [" | ".join(re.findall(r"`([a-z_]+)`", cell[2])) for cell in cells]
    assert documented == layers
    assert sorted(contracts["peers"]["modules"]) == sorted(layers[2].split(" | "))
    floors = sorted(package for layer in layers for package in layer.split(" | "))
    assert sorted(contracts["product-apart"]["source_modules"]) == floors
    assert sorted(linter["root_packages"]) == sorted(
        [*floors, *contracts["product-apart"]["forbidden_modules"]]
    )
