"""The MQTT link over TLS: against a Mosquitto whose listener speaks TLS only, a link that
trusts the broker's CA connects and carries messages; a client that does not trust it, or
does not speak TLS, is refused."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from pathlib import Path

import aiomqtt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from framefleet.local_ports import free_port
from kernel.clock import SystemClock
from kernel.mqtt_link import LinkSettings, MqttLink
from tests.support.mosquitto import LocalMosquitto
from tests.support.waits import async_wait_until


def certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A CA, and a certificate it signed for 127.0.0.1: (CA, certificate, key) files."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "FrameFleet test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = folder / "ca.pem", folder / "broker.pem", folder / "broker.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    paths[2].chmod(0o600)
    return paths


async def test_a_link_that_trusts_the_brokers_ca_talks_over_tls(tmp_path: Path) -> None:
    ca, certificate, key = certificates(tmp_path)
    broker = LocalMosquitto(tmp_path, free_port(), tls=(certificate, key))
    broker.start()
    try:
        received: list[tuple[str, bytes]] = []

        async def on_message(topic: str, payload: bytes) -> None:
            received.append((topic, payload))

        settings = LinkSettings(port=broker.port, client_id="tls-test", tls=True, ca_file=str(ca))
        link = MqttLink(settings, ["ff/v1/tls/#"], on_message, SystemClock())
        stop = asyncio.Event()
        running = asyncio.create_task(link.run(stop))
        await asyncio.wait_for(link.connected.wait(), 15)
        await link.publish("ff/v1/tls/hello", "over TLS")
        await async_wait_until(lambda: bool(received), what="the message back")
        assert received == [("ff/v1/tls/hello", b"over TLS")]
        stop.set()
        await asyncio.wait_for(running, 15)

        # No trust in that CA: the certificate does not verify.
        with pytest.raises(aiomqtt.MqttError):
            async with aiomqtt.Client(
                "127.0.0.1", broker.port, tls_context=ssl.create_default_context()
            ):
                pass
        # No TLS at all: the listener does not speak plain MQTT.
        with pytest.raises(aiomqtt.MqttError):
            async with aiomqtt.Client("127.0.0.1", broker.port, timeout=5):
                pass
    finally:
        broker.stop()
