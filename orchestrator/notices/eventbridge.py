"""A notice put on the deployment's EventBridge bus (Terraform makes it): source `framefleet`,
detail-type the notice's kind (`job.succeeded`, ...), detail the notice's JSON. Rules on the
bus route them on (a queue, a Lambda, an SNS topic): `{"source": ["framefleet"]}`."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from orchestrator.store.notice_book import StoredNotice

SOURCE = "framefleet"


class EventBridgeSender:
    def __init__(self, events: Any, bus: str) -> None:
        """`events`: an aioboto3 EventBridge client; `bus`: the bus's name or ARN."""
        self._events, self._bus = events, bus

    async def send(self, notice: StoredNotice) -> str | None:
        entry = {
            "Source": SOURCE,
            "DetailType": notice.kind,
            "Detail": notice.body,
            "EventBusName": self._bus,
            "Resources": [],
        }
        try:
            answer = await self._events.put_events(Entries=[entry])
        except (BotoCoreError, ClientError) as error:
            return f"{type(error).__name__}: {error}"
        if answer.get("FailedEntryCount"):
            (result,) = answer["Entries"]
            return f"{result.get('ErrorCode')}: {result.get('ErrorMessage')}"
        return None
