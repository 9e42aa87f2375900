"""s3://bucket/key parsing, with the same bucket rules as the job protocol."""

from __future__ import annotations

import re

from worker_ami.agent.errors import WorkerError

_URI = re.compile(
    r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<key>[A-Za-z0-9!_.*'()/-]*)$"
)


def split_s3_uri(uri: str) -> tuple[str, str]:
    match = _URI.match(uri)
    if match is None or "/../" in f"/{match['key']}/" or "//" in match["key"]:
        raise WorkerError(f"not a valid s3://bucket/key URI: {uri!r}")
    return match["bucket"], match["key"]
