"""The dead-letter message contract: the original body plus these SQS message attributes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

ATTR_PREFIX = "framefleet-"
ATTR_REASON = f"{ATTR_PREFIX}reason"
ATTR_ERRORS = f"{ATTR_PREFIX}errors"
ATTR_ORIGINAL_MESSAGE_ID = f"{ATTR_PREFIX}original-message-id"
ATTR_REJECTED_AT = f"{ATTR_PREFIX}rejected-at"
ATTR_SOURCE_QUEUE = f"{ATTR_PREFIX}source-queue"
ATTR_BODY_TRUNCATED = f"{ATTR_PREFIX}body-truncated"
MAX_ERRORS_ATTRIBUTE_CHARS = 4096


def dead_letter_attributes(
    reason: str,
    errors: Sequence[str],
    message_id: str,
    rejected_at: datetime,
    source_queue: str = "",
) -> dict[str, str]:
    """The attributes every dead letter carries, whichever loop refused it."""
    attributes = {
        ATTR_REASON: reason,
        ATTR_ERRORS: json.dumps(list(errors))[:MAX_ERRORS_ATTRIBUTE_CHARS],
        ATTR_ORIGINAL_MESSAGE_ID: message_id,
        ATTR_REJECTED_AT: rejected_at.isoformat(),
    }
    if source_queue:
        attributes[ATTR_SOURCE_QUEUE] = source_queue
    return attributes
