"""A port handed to a server about to start lies below the ephemeral range, where no outgoing
connection can take it first, and nothing listens on it."""

from __future__ import annotations

import socket

from framefleet.local_ports import _ephemeral_floor, free_port


def test_a_free_port_is_bindable_and_below_the_ephemeral_range() -> None:
    floor = _ephemeral_floor()
    for _ in range(20):
        port = free_port()
        assert port < floor
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))


def test_a_listening_port_is_never_handed_out() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", free_port()))
        listening.listen()
        taken = listening.getsockname()[1]
        assert all(free_port() != taken for _ in range(200))
