"""A free TCP port on 127.0.0.1 for a server this process is about to start elsewhere (the
demo's and the tests' brokers, moto, a replica's /metrics).

Binding port 0 hands out a port from the ephemeral range, the same range every outgoing
connection's local port comes from. Between closing the probe and the server binding, a busy
machine's next outgoing connection (to moto, to PostgreSQL) may take it, and the server then
fails with EADDRINUSE. So the port is drawn below that range, where only servers bind."""

from __future__ import annotations

import random
import socket
from pathlib import Path

_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10_000
_TRIES = 200


def _ephemeral_floor() -> int:
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default; macOS starts at 49152, above it


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port nothing listens on now, outside the ephemeral range where the system can."""
    ceiling = _ephemeral_floor()
    if ceiling > _LOWEST + _TRIES:
        for port in random.sample(range(_LOWEST, ceiling), _TRIES):
            if _bindable(port):
                return port
    with socket.socket() as sock:  # no room below the range: the system's choice
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
