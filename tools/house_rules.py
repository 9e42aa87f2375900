"""The house rules `make lint` keeps beside ruff and import-linter:

- no Python module over 400 lines as the formatter writes it (the files are formatted in a
  copy first, so a rule met by fighting the formatter is not met);
- no `fmt: skip` or `fmt: off` but beneath a comment that starts "Formatted by hand:" and says
  why (a table of data that reads better laid out by hand);
- no test imports a test module or a conftest (what tests share lives in tests/support; that
  the product never imports the tests is import-linter's `product-apart` contract).

Exits 1 with one line per breach."""

from __future__ import annotations

import ast
import io
import re
import shutil
import subprocess
import sys
import tempfile
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 400
FOLDERS = ("framefleet", "simulator", "orchestrator", "autoscaler", "worker_ami", "kernel")
FOLDERS_TOO = ("tests", "benchmarks", "tools")
_FORMATTER_OFF = re.compile(r"#\s*fmt:\s*(skip|off)\b")
_BY_HAND = "# Formatted by hand:"


def python_files(root: Path) -> list[Path]:
    return sorted(
        path.relative_to(root)
        for folder in (*FOLDERS, *FOLDERS_TOO)
        for path in (root / folder).rglob("*.py")
    )


def formatted_lengths(root: Path, files: list[Path]) -> dict[Path, int]:
    """Each file's length once `ruff format` (with the project's settings) has written it."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch)
        shutil.copy(root / "pyproject.toml", copy / "pyproject.toml")
        for file in files:
            (copy / file).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(root / file, copy / file)
        ruff = Path(sys.executable).with_name("ruff")
        subprocess.run([str(ruff), "format", "--quiet", "."], cwd=copy, check=True)
        return {file: len((copy / file).read_text().splitlines()) for file in files}


def unexplained_formatter_offs(root: Path, files: list[Path]) -> list[str]:
    """Comments only (tokenize's): a string that mentions the directive is not one."""
    breaches: list[str] = []
    for file in files:
        text = (root / file).read_text()
        lines = text.splitlines()
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            number = token.start[0]
            if (
                token.type == tokenize.COMMENT
                and _FORMATTER_OFF.search(token.string)
                and not (number > 1 and lines[number - 2].strip().startswith(_BY_HAND))
            ):
                breaches.append(f"{file}:{number}: formatter turned off without '{_BY_HAND} why'")
    return breaches


def imported_modules(text: str) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append(node.module)
    return found


def tests_importing_tests(root: Path, files: list[Path]) -> list[str]:
    breaches: list[str] = []
    for file in files:
        for module in imported_modules((root / file).read_text()):
            parts = module.split(".")
            if file.parts[0] in FOLDERS and parts[0] in FOLDERS_TOO:
                breaches.append(f"{file}: the product imports {module}")
            elif (
                file.parts[0] == "tests"
                and parts[0] == "tests"
                and (any(part.startswith("test_") for part in parts) or parts[-1] == "conftest")
            ):
                breaches.append(f"{file}: a test imports {module} (shared code: tests/support)")
    return breaches


def breaches(root: Path = ROOT) -> list[str]:
    files = python_files(root)
    too_long = [
        f"{file}: {length} lines formatted (at most {MAX_LINES})"
        for file, length in formatted_lengths(root, files).items()
        if length > MAX_LINES
    ]
    return too_long + unexplained_formatter_offs(root, files) + tests_importing_tests(root, files)


def main() -> int:
    found = breaches()
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
