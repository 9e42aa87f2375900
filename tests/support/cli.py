"""`framefleet` as a user runs it: a subprocess with settings from the environment, and the
dead letters it shows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.local_services import Queues

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


def framefleet(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "framefleet", *args],
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def dead_letters_shown(
    sqs: SQSClient,
    moto_endpoint: str,
    queues: Queues,
    body: str,
    reason: str,
    errors: str,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """Put one dead letter on the queue, then run `framefleet dead-letters`."""
    sqs.send_message(
        QueueUrl=queues.dead_letter_url,
        MessageBody=body,
        MessageAttributes={
            "framefleet-reason": {"DataType": "String", "StringValue": reason},
            "framefleet-errors": {"DataType": "String", "StringValue": errors},
        },
    )
    env |= {
        "FRAMEFLEET_ENDPOINT_URL": moto_endpoint,
        "FRAMEFLEET_JOBS_QUEUE_URL": queues.jobs_url,
        "FRAMEFLEET_DEAD_LETTER_QUEUE_URL": queues.dead_letter_url,
    }
    return framefleet("dead-letters", env=env)
