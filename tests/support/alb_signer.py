"""A stand-in for the load balancer's sign-on: an ES256 key of its own, the claims header it
would sign (padded base64url, as the ALB writes it), and its public key served over HTTP where
the API fetches it, as AWS publishes the region's keys."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

ALB_ARN = (
    "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/app/ff-api/50dc6c495c0c9188"
)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem(key: ec.EllipticCurvePrivateKey) -> str:
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return public.decode()


@dataclass
class AlbSigner:
    kid: str = "2f0e8d1c-key"
    key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )

    @property
    def public_pem(self) -> str:
        return _pem(self.key)

    def header(self, signer: str = ALB_ARN, ttl: float = 120, **claims: Any) -> str:
        body = {"sub": "u-1", "email": "ada@example.com", "exp": int(time.time() + ttl), **claims}
        token = jwt.encode(
            body, self.key, algorithm="ES256", headers={"kid": self.kid, "signer": signer}
        )
        # The ALB pads each part.
        return ".".join(part + "=" * (-len(part) % 4) for part in token.split("."))


@contextmanager
def served_keys(*signers: AlbSigner) -> Iterator[str]:
    """An HTTP server of public keys by kid; yields its URL template (`.../{kid}`)."""
    keys = {signer.kid: signer.public_pem for signer in signers}

    class Keys(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            pem = keys.get(self.path.lstrip("/"))
            self.send_response(200 if pem else 404)
            self.end_headers()
            self.wfile.write((pem or "").encode())

        def log_message(self, *_: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Keys)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{{kid}}"
    finally:
        server.shutdown()
        server.server_close()
