"""`make demo` runs end to end: intake, dead letters, rendering, a spot notice and an exact
resume on another worker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_the_demo_runs_and_the_resumed_video_is_identical(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "framefleet.demo"],
        cwd=tmp_path,  # the demo writes .demo/ where it runs
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(Path(__file__).parent.parent)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "intake: accepted 6, duplicate 1, dead_lettered 2" in out
    assert "invalid_json" in out
    assert "invalid_job" in out
    assert "spot notice on spot-a" in out
    assert "yes, bit for bit" in out
    assert out.count("succeeded on") == 6
    assert (tmp_path / ".demo" / "framefleet.db").is_file()
