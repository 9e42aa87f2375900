"""Checking a completion notice a webhook received (README, "Completion notices"):

    from framefleet_client.notices import verify, BadSignature
    notice = verify(secret, request_body, request_headers)   # the notice, as a dict

A notice is signed with HMAC-SHA256 over "<timestamp>.<body>" with the deployment's webhook
secret; one signed longer ago than `tolerance_seconds` is refused (a replay). Delivery is at
least once: deduplicate by `notice["notice_id"]` (also the FrameFleet-Notice-Id header)."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from framefleet_client.errors import ClientError

SIGNATURE_HEADER = "FrameFleet-Signature"
TIMESTAMP_HEADER = "FrameFleet-Timestamp"
NOTICE_ID_HEADER = "FrameFleet-Notice-Id"


class BadSignature(ClientError):
    """Not a notice of this deployment's (or too old, or changed on the way)."""


def verify(
    secret: str | bytes,
    body: bytes,
    headers: Mapping[str, str],
    *,
    tolerance_seconds: float = 300.0,
    now: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """The notice, once its signature and age check out; BadSignature otherwise."""
    lowered = {name.lower(): value for name, value in headers.items()}
    timestamp = lowered.get(TIMESTAMP_HEADER.lower(), "")
    sent = lowered.get(SIGNATURE_HEADER.lower(), "")
    if not timestamp.isdigit() or not sent.startswith("v1="):
        raise BadSignature("no FrameFleet signature")
    if abs(now() - int(timestamp)) > tolerance_seconds:
        raise BadSignature(f"signed at {timestamp}: too long ago (or ahead)")
    key = secret.encode() if isinstance(secret, str) else secret
    expected = hmac.new(key, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, sent.removeprefix("v1=")):
        raise BadSignature("the signature does not match")
    notice = json.loads(body)
    if not isinstance(notice, dict):
        raise BadSignature("not a notice")
    return notice
