"""A set that remembers only its newest members, for memories a long-running loop keeps
(ids already seen, instances gone): its size is bounded whatever the process lives through."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

T = TypeVar("T", bound=Hashable)


class BoundedSet(Generic[T]):
    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._members: OrderedDict[T, None] = OrderedDict()

    def add(self, member: T) -> bool:
        """Remember `member` as the newest; False if it was already remembered."""
        known = member in self._members
        self._members[member] = None
        self._members.move_to_end(member)
        while len(self._members) > self._capacity:
            self._members.popitem(last=False)
        return not known

    def __contains__(self, member: object) -> bool:
        return member in self._members

    def __len__(self) -> int:
        return len(self._members)
