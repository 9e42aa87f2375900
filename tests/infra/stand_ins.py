"""What stands in for AWS's managed parts in the deploy rehearsal, each named for what it
replaces: moto for the AWS APIs; the machine's PostgreSQL behind a TLS front that, like RDS with
`rds.force_ssl`, answers only TLS connections; and the production broker config (its
dynamic-security plugin, its admin made by the image's entrypoint) with a TLS listener on 8883
that stands for the network load balancer ending TLS with the ACM certificate. The certificate
comes from a CA of the test's own, which the processes trust as they would a public one."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import os
import socket
import ssl
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from framefleet.local_ports import free_port
from tests.support.dynsec_broker import dynsec_broker
from tests.support.waits import wait_until

SSL_REQUEST, GSS_REQUEST = 80877103, 80877104  # PostgreSQL's negotiation codes


def reachable(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the bundle the processes trust (SSL_CERT_FILE)
    cert: Path
    key: Path


def certificates(folder: Path, names: list[str], addresses: list[str]) -> Certificates:
    """A CA, and a server certificate for `names` and `addresses` signed by it."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "FrameFleet rehearsal CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(n) for n in names]
                + [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = Certificates(folder / "ca.pem", folder / "server.pem", folder / "server.key")
    paths.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


@contextmanager
def moto_server(host: str, port: int, certs: Certificates, log: Path) -> Iterator[str]:
    """moto in a process of its own (the tests' shared moto holds other tests' resources),
    over TLS as AWS is (the bucket's policy denies any other request), with AWS's managed IAM
    policies loaded, as Terraform attaches some."""
    env = {**os.environ, "MOTO_IAM_LOAD_MANAGED_POLICIES": "true"}
    binary = Path(sys.executable).with_name("moto_server")
    tls = ["-c", str(certs.cert), "-k", str(certs.key)]
    with log.open("ab") as output:
        process = subprocess.Popen(
            [str(binary), "-H", host, "-p", str(port), *tls], env=env, stdout=output, stderr=output
        )
    try:
        wait_until(lambda: reachable(host, port), timeout=60, what="moto to listen")
        yield f"https://{host}:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    writer.close()


class PostgresTlsFront:
    """RDS's endpoint: PostgreSQL's SSLRequest answered with TLS, the session then passed to the
    machine's PostgreSQL; a client that does not ask for TLS is turned away (rds.force_ssl)."""

    def __init__(self, host: str, port: int, certs: Certificates, upstream: tuple[str, int]):
        self.host, self.port, self._upstream = host, port, upstream
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(certs.cert, certs.key)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> PostgresTlsFront:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, self.host, self.port), self._loop
        )
        self._server = future.result(timeout=10)
        return self

    def __exit__(self, *_: object) -> None:
        self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                _, code = struct.unpack("!ii", await reader.readexactly(8))
                if code == GSS_REQUEST:
                    writer.write(b"N")
                    await writer.drain()
                    continue
                if code != SSL_REQUEST:
                    writer.close()
                    return
                writer.write(b"S")
                await writer.drain()
                break
            await writer.start_tls(self._context)
            upstream_reader, upstream_writer = await asyncio.open_connection(*self._upstream)
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            writer.close()
            return
        await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))


@contextmanager
def broker(folder: Path, gateway: str, admin_password: str, certs: Certificates) -> Iterator[None]:
    """The production broker config and entrypoint (tests/dynsec_broker.py), with the load
    balancer's TLS listener on gateway:8883, what the tasks reach."""
    tls = f"listener 8883 {gateway}\ncertfile {certs.cert}\nkeyfile {certs.key}\n"
    with dynsec_broker(folder, free_port(), admin_password, tls):
        wait_until(lambda: reachable(gateway, 8883), timeout=30, what="the broker's TLS listener")
        yield
