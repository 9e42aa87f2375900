"""Each job's own log lines, kept beside its video for the console's job page.

A logging handler keeps the lines the worker logs while a job's task runs (the task binds the
job, its attempt and its output prefix: kernel/log_context.py), the last `MAX_LINES` of each
attempt, each cut to `MAX_LINE` characters. A shipper writes each attempt's lines that changed
to `<output prefix><job id>.attempt-<n>.log` every few seconds and once more when the worker
stops: where the job's video goes, which the control plane may already read. Lines logged in
the seconds before a spot instance dies without notice may not make it."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from dataclasses import dataclass, field

from kernel.clock import Clock, sleep_unless_stopped
from kernel.errors import FrameFleetError
from kernel.job_spec import attempt_log
from kernel.log_context import current
from worker_ami.agent.object_store import ObjectStore

MAX_LINES = 500
MAX_LINE = 1000
MAX_ATTEMPTS = 64  # attempts whose lines a worker keeps (the oldest are forgotten)
log = logging.getLogger(__name__)


@dataclass
class _Attempt:
    output: str
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=MAX_LINES))
    changed: bool = True


class JobLogBuffer(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        self._attempts: dict[tuple[str, int], _Attempt] = {}
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        ids = current()
        job_id, attempt, output = ids.get("job_id"), ids.get("attempt"), ids.get("output")
        if not isinstance(job_id, str) or not isinstance(attempt, int):
            return
        if not isinstance(output, str):
            return
        try:
            line = self.format(record)[:MAX_LINE]
        except Exception:
            return
        with self._guard:
            kept = self._attempts.get((job_id, attempt))
            if kept is None:
                kept = self._attempts[(job_id, attempt)] = _Attempt(output)
                while len(self._attempts) > MAX_ATTEMPTS:
                    self._attempts.pop(next(iter(self._attempts)))
            kept.lines.append(line)
            kept.changed = True

    def take_changed(self) -> list[tuple[str, int, str, str]]:
        """(job, attempt, output, text) of each attempt with new lines since the last call."""
        changed = []
        with self._guard:  # emit() may run in another thread (asyncio.to_thread)
            for (job_id, attempt), kept in self._attempts.items():
                if kept.changed:
                    kept.changed = False
                    text = "\n".join(kept.lines) + "\n"
                    changed.append((job_id, attempt, kept.output, text))
        return changed


class JobLogShipper:
    def __init__(
        self, buffer: JobLogBuffer, store: ObjectStore, clock: Clock, every: float = 10.0
    ) -> None:
        self._buffer, self._store, self._clock, self._every = buffer, store, clock, every

    async def flush(self) -> None:
        for job_id, attempt, output, text in self._buffer.take_changed():
            bucket, key = attempt_log(output, job_id, attempt)
            try:
                await self._store.put(bucket, key, text.encode())
            except (FrameFleetError, OSError) as error:
                log.warning("job %s: its log was not written: %s", job_id, error)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await sleep_unless_stopped(self._clock, stop, self._every)
            await self.flush()
