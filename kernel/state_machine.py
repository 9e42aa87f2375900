"""One transition table and one check: what the job's, the worker's and the instance's state
machines share. Each keeps its own states, table and history; this says which moves are allowed
and refuses the others with one typed error."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar

from kernel.errors import InvalidTransition

S = TypeVar("S", bound=StrEnum)


@dataclass(frozen=True)
class StateMachine(Generic[S]):
    what: str  # how an error names the subject: "job", "worker", "instance"
    moves: Mapping[S, frozenset[S]]  # state -> the states it may move to

    def allows(self, before: S, after: S) -> bool:
        return after in self.moves[before]

    def terminal(self, state: S) -> bool:
        return not self.moves[state]

    def check(self, subject: str, before: S, after: S) -> None:
        """Raise InvalidTransition unless the table allows `before` -> `after`."""
        if not self.allows(before, after):
            raise InvalidTransition(f"{self.what} {subject!r}", before.value, after.value)
