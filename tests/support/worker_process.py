"""A worker process run as the systemd unit runs it: its environment and the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from worker_ami.agent.settings import WorkerSettings


def worker_env(settings: WorkerSettings, cache_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "FRAMEFLEET_WORKER_ENDPOINT_URL": str(settings.endpoint_url),
        "FRAMEFLEET_WORKER_CHECKPOINT_BUCKET": str(settings.checkpoint_bucket),
        "FRAMEFLEET_WORKER_MODEL_REGISTRY": str(settings.model_registry),
        "FRAMEFLEET_WORKER_CACHE_DIR": str(cache_dir),
        "FRAMEFLEET_WORKER_DEVICE": "cpu",
        "FRAMEFLEET_WORKER_ALLOW_CPU": "true",
        "FRAMEFLEET_WORKER_IMDS_ENABLED": "false",
        "FRAMEFLEET_WORKER_MIN_FREE_DISK_GIB": "0",
    }


def run_worker(
    env: dict[str, str], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "framefleet.worker_cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# Periodic checkpoints every few steps: the Young/Daly interval with a tiny mean time between
# interruptions (of the spot pool, or of the host on on-demand capacity).
FREQUENT_CHECKPOINTS = {
    "FRAMEFLEET_WORKER_SPOT_MTBI_HOURS": "0.00002",
    "FRAMEFLEET_WORKER_ON_DEMAND_MTBI_HOURS": "0.00002",
    "FRAMEFLEET_WORKER_INITIAL_CHECKPOINT_WRITE_S": "0.01",
}
