"""Log lines that a flood cannot multiply: at most one line per key per interval, and the next
line says how many were held back meanwhile. The counters in /metrics still count every one;
the log is for a person, who needs the first line and the size of the rest."""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime, timedelta

from kernel.clock import Clock

DEFAULT_INTERVAL = timedelta(seconds=60)
DEFAULT_KEYS = 10_000  # the keys remembered (least recently used forgotten first)


class LogThrottle:
    def __init__(
        self, clock: Clock, interval: timedelta = DEFAULT_INTERVAL, keys: int = DEFAULT_KEYS
    ) -> None:
        self._clock, self._interval, self._keys = clock, interval, keys
        self._lines: OrderedDict[str, tuple[datetime, int]] = OrderedDict()

    def allow(self, key: str) -> int | None:
        """None: stay quiet (held back, counted); else log now, mentioning that many held back
        since this key's last line."""
        now = self._clock.now()
        last = self._lines.get(key)
        if last is not None and now - last[0] < self._interval:
            self._lines[key] = (last[0], last[1] + 1)
            self._lines.move_to_end(key)
            return None
        self._lines[key] = (now, 0)
        self._lines.move_to_end(key)
        while len(self._lines) > self._keys:
            self._lines.popitem(last=False)
        return last[1] if last is not None else 0


def held_back(count: int) -> str:
    """The suffix of a line after `count` held back."""
    return f" ({count} more since the last such line)" if count else ""
