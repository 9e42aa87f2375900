"""What a producer's `pip install` of the client (client/, framefleet-client) pulls, and how
long it takes: into a clean venv each time, without and with the `sqs` extra (boto3); then,
with `--demo URL TOKEN`, the installed client submits a job to a running `framefleet demo
--keep`, waits for it on the event stream and downloads its video.

    .venv/bin/python -m benchmarks.client_install [--demo http://127.0.0.1:PORT TOKEN]

Prints a table and writes benchmarks/results/client_install.json."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from benchmarks.common import write_result

ROOT = Path(__file__).parents[1]


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def install(extra: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as scratch:
        venv = Path(scratch) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        bare = _size(venv)
        started = time.monotonic()
        target = f"{ROOT / 'client'}{extra}"
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", "--no-cache-dir", target], check=True
        )
        seconds = time.monotonic() - started
        listed = subprocess.run(
            [str(venv / "bin" / "pip"), "list", "--format", "freeze"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        return {
            "extra": extra or "(none)",
            "seconds": round(seconds, 1),
            "added_mib": round((_size(venv) - bare) / 2**20, 2),
            "packages": sorted(p for p in listed if not p.startswith(("pip==", "setuptools=="))),
        }


def demo_round_trip(url: str, token: str) -> dict[str, object]:
    """The demo's job through a client installed in a clean venv of its own."""
    with tempfile.TemporaryDirectory() as scratch:
        venv = Path(scratch) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", str(ROOT / "client")], check=True
        )
        video = Path(scratch) / "video.mp4"
        started = time.monotonic()
        done = subprocess.run(
            [
                str(venv / "bin" / "python"),
                str(ROOT / "examples" / "producer" / "submit_and_wait.py"),
                str(ROOT / "examples" / "producer" / "demo-job.json"),
                str(video),
                "--timeout",
                "900",
            ],
            env={"FRAMEFLEET_URL": url, "FRAMEFLEET_TOKEN": token, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=False,
        )
        return {
            "exit": done.returncode,
            "seconds": round(time.monotonic() - started, 1),
            "video_bytes": video.stat().st_size if video.exists() else 0,
            "output": done.stdout[-2000:] + done.stderr[-2000:],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--demo", nargs=2, metavar=("URL", "TOKEN"))
    args = parser.parse_args()
    installs = [install(""), install("[sqs]")]
    table = Table(title="pip install of the producers' client into a clean venv")
    for column in ("extra", "seconds", "added MiB", "packages"):
        table.add_column(column)
    for row in installs:
        packages = row["packages"]
        assert isinstance(packages, list)
        shown = [str(row["extra"]), str(row["seconds"]), str(row["added_mib"]), ", ".join(packages)]
        table.add_row(*(Text(cell) for cell in shown))  # "[sqs]" is not markup
    console = Console()
    console.print(table)
    result: dict[str, object] = {"installs": installs}
    if args.demo:
        trip = demo_round_trip(*args.demo)
        console.print(f"demo round trip: {trip}")
        result["demo"] = trip
    write_result("client_install", result)


if __name__ == "__main__":
    main()
