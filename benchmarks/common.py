"""Shared benchmark plumbing: a moto server in its own process, result files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from framefleet.local_ports import free_port

RESULTS_DIR = Path(__file__).parent / "results"


@contextmanager
def moto_server_process() -> Iterator[str]:
    """moto in server mode in a separate process, so its CPU is not our process's GIL."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    port = free_port()
    code = (
        "import logging, sys, threading; from moto.server import ThreadedMotoServer;"
        "logging.getLogger('werkzeug').setLevel(logging.ERROR);"
        f"s = ThreadedMotoServer(ip_address='127.0.0.1', port={port}, verbose=False); s.start();"
        "sys.stdin.read(); s.stop()"
    )
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)  # noqa: S310
            break
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                raise
            time.sleep(0.1)
    try:
        yield endpoint
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=30)


def write_result(name: str, data: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return path
