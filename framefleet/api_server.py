"""The HTTP API and console, wired and served: the API's services built from settings, and
uvicorn run inside the control plane's event loop (its stop event stops it, not a signal)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime

import boto3
import uvicorn
from botocore.config import Config
from botocore.exceptions import ClientError

from framefleet.api_settings import SsoConfig
from framefleet.bounded_http import ConnectionBounds, bounded_protocol, descriptor_room
from framefleet.settings import Settings
from kernel.clock import Clock
from kernel.errors import ConfigurationError
from orchestrator.api.alb_identity import AlbIdentity, SsoRule
from orchestrator.api.app import build_app
from orchestrator.api.ports import ApiServices, ApiSettings, DeadLetterView
from orchestrator.aws.dead_letters import (
    discard_dead_letter,
    peek_dead_letters,
    redrive_dead_letter,
)
from orchestrator.costs.focus import FocusExport, focus_export
from orchestrator.costs.job_cost import JobCostParts, job_cost
from orchestrator.costs.ledger import CostLedger
from orchestrator.costs.summary import CostSummary, summarize
from orchestrator.intake.model_door import ModelDoor
from orchestrator.store.history_facts import HistoryFacts
from orchestrator.store.job_store import JobStore

log = logging.getLogger(__name__)


def api_services(
    settings: Settings, store: JobStore, clock: Clock, door: ModelDoor | None = None
) -> ApiServices:
    ledger = CostLedger(store.cost_facts, clock, settings.costs.ledger())
    s3 = boto3.client(
        "s3",
        region_name=settings.region,
        endpoint_url=settings.endpoint_url,
        config=Config(signature_version="s3v4"),
    )

    def cost_of(job_id: str) -> JobCostParts | None:
        return job_cost(store.cost_facts, ledger, job_id, clock.now())

    def period_costs(
        since: datetime, until: datetime, teams: tuple[str, ...] | None
    ) -> tuple[CostSummary, list[str]]:
        period = ledger.period(since, until)
        if teams is not None:
            period = period.of_teams(teams)
        return summarize(period, ledger.s3_usd(period.attempts)), period.incomplete

    def export(since: datetime, until: datetime) -> FocusExport:
        return focus_export(ledger, since, until, settings.costs.billing_account_id)

    def presign(bucket: str, key: str, seconds: int) -> str:
        url: str = s3.generate_presigned_url(
            "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=seconds
        )
        return url

    def read_text(bucket: str, key: str, limit: int) -> str | None:
        try:
            found = s3.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{limit - 1}")
        except s3.exceptions.NoSuchKey:
            return None
        except ClientError as error:
            log.warning("cannot read s3://%s/%s: %s", bucket, key, error)
            return None
        body: bytes = found["Body"].read(limit)
        return body.decode("utf-8", errors="replace")

    dead_letters = redrive = discard = None
    if settings.dead_letter_queue_url:
        sqs = boto3.client("sqs", region_name=settings.region, endpoint_url=settings.endpoint_url)
        queue_url = settings.dead_letter_queue_url

        def dead_letters() -> list[DeadLetterView]:
            return [
                DeadLetterView(letter.message_id, letter.reason, letter.errors, letter.body[:2000])
                for letter in peek_dead_letters(sqs, queue_url, limit=200)
            ]

        def discard(message_id: str) -> bool:
            return discard_dead_letter(sqs, queue_url, message_id)

        if settings.jobs_queue_url:
            jobs_url = settings.jobs_queue_url

            def redrive(message_id: str) -> bool:
                return redrive_dead_letter(sqs, queue_url, jobs_url, message_id)

    config = settings.api
    identity = single_sign_on(config.sso) if config.sso is not None else None
    return ApiServices(
        store=store,
        clock=clock,
        job_cost=cost_of,
        period_costs=period_costs,
        presign=presign,
        history=HistoryFacts(store.engine),
        read_text=read_text,
        dead_letters=dead_letters,
        redrive_dead_letter=redrive,
        discard_dead_letter=discard,
        admit=door.admit if door is not None else None,
        inputs_refusal=door.inputs_refusal if door is not None else None,
        focus_export=export,
        identity=identity.caller if identity is not None else None,
        settings=ApiSettings(
            max_body_bytes=config.max_body_bytes or settings.max_message_bytes,
            requests_per_minute=config.requests_per_minute,
            failed_auth_per_minute=config.failed_auth_per_minute,
            event_poll_seconds=config.event_poll_seconds,
            max_streams_per_token=config.max_streams_per_token,
            output_link_seconds=config.output_link_seconds,
            secure_cookie=config.secure_cookie,
            output_prefixes=settings.output_prefixes,
            webhooks=settings.notices.rule(),
        ),
    )


def single_sign_on(config: SsoConfig) -> AlbIdentity:
    """The load balancer's sign-on header believed as `config` says, its keys fetched from
    the region's published place."""
    rule = SsoRule(
        load_balancer_arn=config.load_balancer_arn,
        keys_url=config.keys_url.replace("{region}", config.region),
        group_claim=config.group_claim,
        operator_groups=frozenset(config.operator_groups),
        team_groups={group: tuple(teams) for group, teams in config.team_groups.items()},
    )

    def fetch_key(url: str) -> str:
        with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 - https (settings)
            return str(answer.read(16_384).decode("ascii"))

    return AlbIdentity(rule, fetch_key)


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The control plane owns SIGTERM and SIGINT: its stop event ends this server.
        yield


class ApiServer:
    def __init__(
        self,
        services: ApiServices,
        host: str,
        port: int,
        bounds: ConnectionBounds,
        trusted_proxies: tuple[str, ...] = (),
    ) -> None:
        self.host, self.port = host, port
        bounds = replace(bounds, max_connections=descriptor_room(bounds.max_connections))
        config = uvicorn.Config(
            build_app(services),
            host=host,
            port=port,
            lifespan="off",
            log_config=None,
            timeout_graceful_shutdown=3,
            server_header=False,
            # Connections are bounded as they arrive (`bounded_http`); requests in the app too.
            http=bounded_protocol(bounds),
            limit_concurrency=bounds.max_connections,
            timeout_keep_alive=5,
            # X-Forwarded-For from the trusted proxies only: uvicorn's default believed it
            # from loopback, where a client could rotate it past the failed-auth throttle.
            proxy_headers=bool(trusted_proxies),
            forwarded_allow_ips=list(trusted_proxies) or None,
        )
        self._server = _Server(config)

    def _listen(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as error:
            sock.close()
            raise ConfigurationError(
                f"the API cannot listen on {self.host}:{self.port}: {error.strerror}"
            ) from None
        return sock

    async def run(self, stop: asyncio.Event) -> None:
        sock = self._listen()
        serving = asyncio.create_task(self._server.serve(sockets=[sock]))
        log.info("API and console on http://%s:%d/console", self.host, self.port)
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
            self._server.should_exit = True
            await serving
        finally:
            stopping.cancel()
            sock.close()


def build_api(
    settings: Settings, store: JobStore, clock: Clock, door: ModelDoor | None = None
) -> ApiServer | None:
    api = settings.api
    if api.port is None:
        return None
    services = api_services(settings, store, clock, door)
    bounds = ConnectionBounds(
        api.max_connections,
        api.max_connections_per_address,
        api.header_timeout_seconds,
        api.body_timeout_seconds,
    )
    return ApiServer(services, api.host, api.port, bounds, api.trusted_proxies)
