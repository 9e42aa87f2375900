"""`make lint`'s house rules: the line limit is measured on formatted code, and the formatter is
turned off only beneath a reason."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.support.paths import ROOT
from tools.house_rules import MAX_LINES, breaches


def tree(tmp_path: Path, files: dict[str, str]) -> Path:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_a_module_squeezed_under_the_limit_by_hand_is_measured_as_the_formatter_writes_it(
    tmp_path: Path,
) -> None:
    # Two statements a line: MAX_LINES / 2 + 1 lines as written, MAX_LINES + 2 once formatted.
    squeezed = "".join(f"a{i} = {i}; b{i} = {i}\n" for i in range(MAX_LINES // 2 + 1))
    fine = "".join(f"a{i} = {i}\n" for i in range(MAX_LINES))
    root = tree(tmp_path, {"kernel/squeezed.py": squeezed, "kernel/fine.py": fine})

    assert breaches(root) == [f"kernel/squeezed.py: {MAX_LINES + 2} lines formatted (at most 400)"]


def test_the_formatter_is_turned_off_only_beneath_a_reason(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "kernel/table.py": "# Formatted by hand: a price table reads by rows.\n"
            "PRICES = [1,   2]  # fmt: skip\n",
            "kernel/fight.py": "X = [1,   2]  # fmt: skip\n",
        },
    )

    assert breaches(root) == [
        "kernel/fight.py:1: formatter turned off without '# Formatted by hand: why'"
    ]


def test_no_test_imports_another_test_or_a_conftest(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "tests/orchestrator/test_a.py": "from tests.orchestrator.test_b import helper\n",
            "tests/orchestrator/test_c.py": "from tests.orchestrator.conftest import Fixture\n",
            "tests/orchestrator/test_d.py": "from tests.support.jobs import job_dict\n",
        },
    )

    assert breaches(root) == [
        "tests/orchestrator/test_a.py: a test imports tests.orchestrator.test_b"
        " (shared code: tests/support)",
        "tests/orchestrator/test_c.py: a test imports tests.orchestrator.conftest"
        " (shared code: tests/support)",
    ]
