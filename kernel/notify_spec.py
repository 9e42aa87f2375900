"""A job's `notify`: the webhook its producer is told at, and which of the job's moves it hears
of. Whether a URL may be called is the deployment's rule (`WebhookRule`), checked at the door
so that a job naming an address inside the network is refused before it costs anything, and
again at each delivery (a name may resolve elsewhere by then): no https, a loopback, private,
link-local or otherwise non-public address, credentials in the URL: refused, unless the
deployment allows those networks (`notices.webhook_allowed_networks`)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field


class NoticeKind(StrEnum):
    ENDED = "ended"  # succeeded, failed or cancelled: every job's end
    INTERRUPTED = "interrupted"  # its instance was taken back; it resumes elsewhere
    RESUMED = "resumed"  # it runs again after an interruption


class NotifySpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    webhook: str = Field(
        max_length=2048,
        description="https URL told of the job's moves (a POST, signed with HMAC-SHA256)",
    )
    events: tuple[NoticeKind, ...] = Field(
        default=(NoticeKind.ENDED,),
        min_length=1,
        max_length=3,
        description="which moves: ended (the default), interrupted, resumed",
    )


Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class WebhookRule:
    """Where this deployment's webhooks may go: public https by default."""

    allowed_networks: tuple[Network, ...] = ()  # non-public networks allowed all the same
    allow_http: bool = False  # plain http too (a test bench; never in production)
    sends: bool = True  # False: the deployment sends no webhooks (it has no key to sign with)

    @classmethod
    def of(
        cls, networks: Iterable[str], allow_http: bool = False, sends: bool = True
    ) -> WebhookRule:
        allowed = tuple(ipaddress.ip_network(n, strict=False) for n in networks)
        return cls(allowed, allow_http, sends)

    def url_refusal(self, url: str) -> str | None:
        """Why `url` may not be called, from the URL alone (None: it may, so far)."""
        if not self.sends:
            return "this deployment sends no webhooks (notices.webhook_secret is not set)"
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as error:
            return f"not a URL: {error}"
        schemes = ("https", "http") if self.allow_http else ("https",)
        if parts.scheme not in schemes:
            return "must be an https URL"
        if not parts.hostname:
            return "must name a host"
        if parts.username or parts.password:
            return "must not carry credentials (the notice is signed instead)"
        if port == 0:
            return "must not name port 0"
        host = parts.hostname.rstrip(".").lower()
        if host == "localhost" or host.endswith((".localhost", ".internal", ".local")):
            return f"{host} is not a public host"
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return None  # a name: its addresses are checked when it is called
        return self.address_refusal(address)

    def address_refusal(self, address: Address) -> str | None:
        """Why an address a webhook's host resolves to may not be called."""
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if any(address in network for network in self.allowed_networks):
            return None
        if not address.is_global or address.is_multicast:
            return f"{address} is not a public address (loopback, private, link-local, ...)"
        return None
