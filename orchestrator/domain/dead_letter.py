"""The dead-letter message contract: the original body plus these SQS message attributes."""

from __future__ import annotations

ATTR_PREFIX = "framefleet-"
ATTR_REASON = f"{ATTR_PREFIX}reason"
ATTR_ERRORS = f"{ATTR_PREFIX}errors"
ATTR_ORIGINAL_MESSAGE_ID = f"{ATTR_PREFIX}original-message-id"
ATTR_REJECTED_AT = f"{ATTR_PREFIX}rejected-at"
ATTR_SOURCE_QUEUE = f"{ATTR_PREFIX}source-queue"
ATTR_BODY_TRUNCATED = f"{ATTR_PREFIX}body-truncated"
