"""Which job, attempt, worker and instance a log line is about, for log shippers.

The ids live in a context variable: `bind` sets them for the rest of the current asyncio task
(a task copies the context it was created in, so a job's task binds its job and attempt once
and every line it logs carries them), `log_context` for a block. `ContextFilter` copies them
onto each record; the JSON format (`log_format = "json"`, kernel/settings_support.py) writes
them as fields, the text format leaves them out.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# `output`: where the job writes (s3://bucket/prefix/); its log is kept there too.
FIELDS = frozenset({"job_id", "attempt", "output", "worker_id", "instance_id"})
Ids = dict[str, str | int]

_ids: ContextVar[Ids | None] = ContextVar("framefleet_log_ids", default=None)


def _merged(given: dict[str, str | int | None]) -> Ids:
    unknown = set(given) - FIELDS
    if unknown:
        raise TypeError(f"not a log id: {sorted(unknown)}")
    return {**(_ids.get() or {}), **{k: v for k, v in given.items() if v is not None}}


def bind(**ids: str | int | None) -> None:
    """job_id, attempt, worker_id, instance_id for the rest of the current task (and the
    tasks it creates after); None leaves one as it was."""
    _ids.set(_merged(ids))


@contextmanager
def log_context(**ids: str | int | None) -> Iterator[None]:
    """The same, for one block: handling one message, say."""
    token = _ids.set(_merged(ids))
    try:
        yield
    finally:
        _ids.reset(token)


def current() -> Ids:
    return dict(_ids.get() or {})


class ContextFilter(logging.Filter):
    """Puts the bound ids on each record (as attributes the JSON formatter writes)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in (_ids.get() or {}).items():
            setattr(record, name, value)
        return True
