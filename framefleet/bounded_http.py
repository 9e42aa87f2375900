"""The API's connections, bounded (issue 48): uvicorn's `limit_concurrency` answers 503 only
to a request it has read whole, so clients that never finish their headers were all held
open, up to the process's descriptor limit, and then nobody got in. Here, on uvicorn's h11
protocol:

- a connection past `max_connections`, or past `per_address` from one client address, is
  answered 503 and closed as it arrives, before a byte of it is read;
- a request's headers must arrive within `header_seconds` of the connection (or of the
  previous response), and its body within `body_seconds` of the headers; past either, 408
  and closed;
- `max_connections` is held below the process's descriptor limit (`descriptor_room`), with
  room kept for the store, the broker and the AWS clients.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from dataclasses import dataclass
from typing import Literal

from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

# Descriptors kept for everything but the API: the store's pool, the broker, SQS, S3 and
# EC2 clients' pools (64 each), the logs and the health server.
RESERVED_DESCRIPTORS = 512
LINGER_SECONDS = 1.0  # a refused connection's, for its client to read the answer


def _answer(status: str, why: str) -> bytes:
    body = (why + "\n").encode()
    head = (
        f"HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\n"
        f"connection: close\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


BUSY = _answer("503 Service Unavailable", "the API holds as many connections as it may")
TOO_SLOW = _answer("408 Request Timeout", "the request did not arrive in time")


@dataclass(frozen=True)
class ConnectionBounds:
    max_connections: int
    per_address: int
    header_seconds: float
    body_seconds: float


def descriptor_room(wanted: int) -> int:
    """The connections the process can hold: `wanted`, with the soft descriptor limit raised
    towards the hard one to make room, else as many as the limit leaves."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = wanted + RESERVED_DESCRIPTORS
    if soft != resource.RLIM_INFINITY and soft < needed:
        raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        soft = raised
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return wanted
    room = max(8, soft - RESERVED_DESCRIPTORS)
    log.warning(
        "api.max_connections lowered from %d to %d: the descriptor limit is %d", wanted, room, soft
    )
    return room


def bounded_protocol(bounds: ConnectionBounds) -> type[H11Protocol]:
    """uvicorn's h11 protocol with `bounds` kept (uvicorn takes the class as `http`)."""

    class BoundedH11Protocol(H11Protocol):
        _timer: asyncio.TimerHandle | None = None
        _stage: Literal["headers", "body"] | None = None
        _cycle_then: object = None
        _refused = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            peer = self.client[0] if self.client else ""
            from_peer = sum(
                1 for c in self.connections if (getattr(c, "client", None) or ("",))[0] == peer
            )
            if len(self.connections) > bounds.max_connections or from_peer > bounds.per_address:
                self._refuse(BUSY)
                return
            self._arm("headers", bounds.header_seconds)

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return  # read and dropped, so that closing does not reset the answer away
            super().data_received(data)
            cycle = self.cycle
            if self._stage == "headers" and cycle is not None and cycle is not self._cycle_then:
                self._arm("body", bounds.body_seconds)
            if self._stage == "body" and cycle is not None and not cycle.more_body:
                self._disarm()  # the request is in: what the app takes is not the client's

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm("headers", bounds.header_seconds)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self, stage: Literal["headers", "body"], seconds: float) -> None:
            self._disarm()
            self._stage, self._cycle_then = stage, self.cycle
            self._timer = self.loop.call_later(seconds, self._too_slow)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
            self._timer, self._stage = None, None

        def _too_slow(self) -> None:
            self._timer, self._stage = None, None
            if not self.transport.is_closing():
                self._refuse(TOO_SLOW)

        def _refuse(self, answer: bytes) -> None:
            """Answer, say no more (FIN), and close a moment later: closing at once, with
            the client's bytes unread, resets the connection before the answer is read."""
            self._refused = True
            self.transport.write(answer)
            if self.transport.can_write_eof():
                self.transport.write_eof()
            self.loop.call_later(LINGER_SECONDS, self.transport.close)

    return BoundedH11Protocol
