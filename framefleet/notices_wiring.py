"""The completion notices' loop as the control plane runs it: a sender for each target the
settings configure (the EventBridge bus, signed webhooks), none without either."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack

import aioboto3
from prometheus_client import CollectorRegistry

from framefleet.settings import Settings
from kernel.clock import Clock
from orchestrator.notices.eventbridge import EventBridgeSender
from orchestrator.notices.service import (
    EVENTBRIDGE,
    WEBHOOK,
    NoticeSender,
    NoticeService,
    NoticeSettings,
)
from orchestrator.notices.webhook import WebhookSender
from orchestrator.store.job_store import JobStore


async def notice_service(
    settings: Settings,
    store: JobStore,
    clock: Clock,
    leads: Callable[[], bool],
    registry: CollectorRegistry,
    stack: AsyncExitStack,
) -> NoticeService | None:
    config = settings.notices
    senders: dict[str, NoticeSender] = {}
    if config.event_bus:
        session = aioboto3.Session(region_name=settings.region)
        events = await stack.enter_async_context(
            session.client("events", endpoint_url=settings.endpoint_url)
        )
        senders[EVENTBRIDGE] = EventBridgeSender(events, config.event_bus)
    if config.webhook_secret is not None:
        secret = config.webhook_secret.get_secret_value().encode()
        webhooks = WebhookSender(secret, config.rule(), clock, config.webhook_timeout_seconds)
        senders[WEBHOOK] = await stack.enter_async_context(webhooks)
    if not senders:
        return None
    tries = NoticeSettings(max_attempts=config.max_attempts)
    return NoticeService(store.notices, senders, clock, leads, registry, tries)
