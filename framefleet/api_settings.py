"""The `api` section of the settings: the HTTP API and console inside `framefleet serve`, and
their single sign-on through the load balancer."""

from __future__ import annotations

import ipaddress

from pydantic import BaseModel, Field, field_validator


class SsoConfig(BaseModel):
    """Single sign-on (README, "Single sign-on"): believe the load balancer's signed claims."""

    # The load balancer that signs them (Terraform sets it when `console_oidc` is given).
    load_balancer_arn: str
    region: str = "us-east-1"
    # Where the region's signing keys are: {region} and {kid} filled in.
    keys_url: str = "https://public-keys.auth.elb.{region}.amazonaws.com/{kid}"
    group_claim: str = "groups"
    # Groups whose people see every team (operators), and each other group's teams.
    operator_groups: tuple[str, ...] = ()
    team_groups: dict[str, list[str]] = Field(default_factory=dict)


class ApiConfig(BaseModel):
    """The HTTP API and web console inside `framefleet serve`."""

    # None: off. On loopback unless asked: set host 0.0.0.0 behind a TLS load balancer.
    port: int | None = Field(default=None, ge=1, le=65535)
    host: str = "127.0.0.1"
    requests_per_minute: int = Field(default=600, ge=1, le=1_000_000)  # per token and replica
    # Failed authentications (bad tokens, failed logins) per client address, per token prefix
    # (guesses at one token's secret) and per replica.
    failed_auth_per_minute: int = Field(default=20, ge=1, le=1_000_000)
    max_body_bytes: int | None = Field(default=None, ge=1024, le=1024 * 1024)  # None: SQS's
    event_poll_seconds: float = Field(default=1.0, gt=0, le=60)
    max_streams_per_token: int = Field(default=4, ge=1, le=1000)
    output_link_seconds: int = Field(default=3600, ge=60, le=7 * 86400)
    secure_cookie: bool = False  # the console's cookie only over HTTPS (behind TLS)
    # Open connections (half-sent requests included) beyond which a new one gets a 503 and is
    # closed: a flood of slow clients cannot use up the process's file descriptors.
    max_connections: int = Field(default=1000, ge=8, le=100_000)
    # Of them, from one client address (a load balancer's node counts as one: raise it there).
    max_connections_per_address: int = Field(default=200, ge=1, le=100_000)
    # A request's headers must arrive within this of the connection (or of the last
    # response), its body within `body_timeout_seconds` of them; else 408 and closed.
    header_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    body_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    # The load balancer's addresses or subnets ("10.0.0.0/24"): only a connection from one of
    # them may name the client in X-Forwarded-For (uvicorn's proxy headers). None trusted,
    # the default: the client is the connection's peer, whatever a header says.
    trusted_proxies: tuple[str, ...] = ()

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for network in value:
            try:
                ipaddress.ip_network(network, strict=False)
            except ValueError:
                raise ValueError(f"{network!r} is not an address or a subnet") from None
        return value

    # None: no single sign-on; the console logs in with a token.
    sso: SsoConfig | None = None
