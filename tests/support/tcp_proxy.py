"""A TCP proxy in front of one dependency, for the fault tests (issue 48): it passes bytes both
ways until told to fail, then each new connection is refused (`cut`: nothing listens), reset
(`reset`: accepted and dropped at once), held without an answer (`blackhole`), served slowly
(`slow`: each chunk either way a second late) or answered 500 (`errors`, for an HTTP
dependency), and every connection open at that moment is dropped. It counts the connections
it failed, so a test waits for a process to have tried rather than for time to pass."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from enum import Enum
from urllib.parse import urlsplit

from sqlalchemy.engine import make_url


class Fault(Enum):
    NONE = "none"
    RESET = "reset"
    BLACKHOLE = "blackhole"
    CUT = "cut"
    SLOW = "slow"
    ERRORS = "errors"  # an HTTP dependency answering 500 to every request


SLOW_DELAY_SECONDS = 1.0  # per chunk, each way: a congested link, not a dead one


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._restart: asyncio.Task[None] | None = None
        self.fault = Fault.NONE
        self.failed = 0  # connections refused an answer while failing
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        self._drop_open()

    def fail(self, fault: Fault) -> None:
        """From now on, `fault` (NONE: pass again); what is open now is dropped."""
        self.fault = fault
        self._drop_open()
        if fault is Fault.CUT and self._server is not None:
            self._server.close()  # nothing listens: each connection is refused
            self._server = None
        elif fault is not Fault.CUT and self._server is None and self.port:
            self._restart = asyncio.get_running_loop().create_task(self.start())  # listening

    def _drop_open(self) -> None:
        for writer in list(self._open):
            writer.transport.abort()
        self._open.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.fault is Fault.ERRORS:
            self.failed += 1
            await self._answer_500(reader, writer)
            return
        if self.fault in (Fault.RESET, Fault.BLACKHOLE):
            self.failed += 1
            if self.fault is Fault.RESET:
                writer.transport.abort()
                return
            self._open.add(writer)
            with contextlib.suppress(ConnectionError):
                await reader.read()  # held: read what comes, answer nothing, until dropped
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._open.update((writer, up_writer))
        await asyncio.gather(
            self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True
        )
        self._open.difference_update((writer, up_writer))

    async def _answer_500(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Each request on the connection answered 500 (its body read and dropped)."""
        self._open.add(writer)
        try:
            while self.fault is Fault.ERRORS:
                head = await reader.readuntil(b"\r\n\r\n")
                fields = dict(
                    (name.strip().lower(), value.strip())
                    for name, _, value in (line.partition(b":") for line in head.split(b"\r\n"))
                )
                await reader.readexactly(int(fields.get(b"content-length", b"0") or b"0"))
                writer.write(_error_answer(fields.get(b"content-type", b"")))
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            self._open.discard(writer)
            writer.transport.abort()

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while chunk := await source.read(65536):
                if self.fault is Fault.SLOW:
                    await asyncio.sleep(SLOW_DELAY_SECONDS)  # the fault itself, not a wait
                sink.write(chunk)
                await sink.drain()
        finally:
            sink.close()


@contextlib.asynccontextmanager
async def proxy_before(url: str) -> AsyncIterator[TcpProxy]:
    """A started `TcpProxy` before the HTTP endpoint `url` (moto's, for AWS)."""
    target = urlsplit(url)
    proxy = TcpProxy(target.hostname or "127.0.0.1", target.port or 80)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()


class ThreadedTcpProxy:
    """A `TcpProxy` on an event loop of its own thread: for a client that blocks the test's
    loop (a synchronous database driver would wait on a proxy that cannot run)."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self._proxy = TcpProxy(target_host, target_port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def port(self) -> int:
        return self._proxy.port

    @property
    def failed(self) -> int:
        return self._proxy.failed

    def __enter__(self) -> ThreadedTcpProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._proxy.start(), self._loop).result(10)
        return self

    def __exit__(self, *_: object) -> None:
        asyncio.run_coroutine_threadsafe(self._proxy.stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def fail(self, fault: Fault) -> None:
        self._loop.call_soon_threadsafe(self._proxy.fail, fault)


def _error_answer(request_type: bytes) -> bytes:
    """A 500 as the service would send it: XML to a query-protocol call (EC2's form posts),
    JSON to the others (SQS)."""
    if request_type.startswith(b"application/x-www-form-urlencoded"):
        kind = b"text/xml"
        body = (
            b"<Response><Errors><Error><Code>InternalError</Code><Message>the proxy says no"
            b"</Message></Error></Errors><RequestID>proxy</RequestID></Response>"
        )
    else:
        kind = b"application/x-amz-json-1.0"
        body = b'{"__type":"InternalFailure","message":"the proxy says no"}'
    head = b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n"
    return head % (kind, len(body)) + body


@contextlib.contextmanager
def database_behind_proxy(database_url: str) -> Iterator[tuple[ThreadedTcpProxy, str]]:
    """A `ThreadedTcpProxy` before the database of `database_url`, and the URL through it."""
    url = make_url(database_url)
    with ThreadedTcpProxy(url.host or "127.0.0.1", url.port or 5432) as proxy:
        yield proxy, url.set(port=proxy.port).render_as_string(hide_password=False)
