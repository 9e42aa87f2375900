"""A Mosquitto of a test's own (a free port, its own config), which it can stop and restart."""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

from tests.support import wait_until


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class PrivateMosquitto:
    def __init__(self, folder: Path, port: int, acl_file: Path | None = None) -> None:
        self.port = port
        self.config = folder / "mosquitto.conf"
        lines = [f"listener {port} 127.0.0.1", "allow_anonymous true", "persistence false"]
        if acl_file is not None:
            lines.append(f"acl_file {acl_file}")
        self.config.write_text("\n".join(lines) + "\n")
        self._binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self._process = subprocess.Popen(
            [self._binary, "-c", str(self.config)], stderr=subprocess.DEVNULL
        )
        wait_until(lambda: _port_open(self.port), timeout=15, what="mosquitto to listen")

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)
            self._process = None
        wait_until(lambda: not _port_open(self.port), timeout=15, what="mosquitto to stop")

    def restart(self) -> None:
        self.stop()
        self.start()
