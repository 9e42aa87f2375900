"""A NATS server of one's own with its MQTT 3.1.1 listener (JetStream on, as NATS's MQTT needs),
for tests and benchmarks: the second broker the worker protocol is held to, besides Mosquitto.
Needs the `nats-server` binary (Debian package nats-server)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.support.mosquitto import LocalBroker


class LocalNats(LocalBroker):
    def __init__(self, folder: Path, port: int, client_port: int) -> None:
        """`port`: its MQTT listener (what workers and the control plane dial)."""
        self.port = port
        self.config = folder / "nats.conf"
        store = folder / "jetstream"
        self.config.write_text(
            f'server_name: "framefleet-test-{port}"\n'
            f'listen: "127.0.0.1:{client_port}"\n'
            f'jetstream {{ store_dir: "{store}" }}\n'
            f'mqtt {{ listen: "127.0.0.1:{port}" }}\n'
        )
        self._binary = shutil.which("nats-server") or "/usr/sbin/nats-server"

    def command(self) -> list[str]:
        return [self._binary, "-c", str(self.config)]
