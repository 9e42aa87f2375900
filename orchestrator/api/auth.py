"""API tokens: scoped, for teams, stored as SHA-256 digests, checked on every request.

A token is `ff_<id>_<secret>`: the id names it in lists and logs, the secret (32 random bytes)
is shown once at creation. Only the digest of the whole token is stored, so a copy of the
database grants nothing; a fast digest is enough for a secret of 256 random bits.

A token belongs to teams (a job's `tags.team`) or to every team (an operator's): it sees and
submits those teams' jobs only. A token may expire; an expired one is refused like a revoked
one.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from kernel.errors import FrameFleetError
from kernel.job_spec import TAG_VALUE_PATTERN
from orchestrator.store.tokens import StoredToken

TOKEN_PREFIX = "ff_"  # noqa: S105 (the prefix every token starts with, not a secret)
MAX_TOKEN_CHARS = 128  # anything longer is not one of ours: refused before it is hashed


class Scope(StrEnum):
    SUBMIT = "submit"
    READ = "read"
    CANCEL = "cancel"
    ADMIN = "admin"  # every scope


class TokenBookPort(Protocol):
    def add_token(
        self,
        token_id: str,
        name: str,
        scopes: tuple[str, ...],
        sha256: str,
        teams: tuple[str, ...] | None = ...,
        expires_at: datetime | None = ...,
    ) -> None: ...


class TokenReader(Protocol):
    def token_with_digest(self, sha256: str) -> StoredToken | None: ...


class TokenBook(TokenBookPort, TokenReader, Protocol):
    """The tokens as the API's token routes keep them."""

    def tokens(self) -> list[StoredToken]: ...

    def revoke_token(self, token_id: str) -> bool: ...


class UnknownScope(FrameFleetError):
    pass


class BadTeam(FrameFleetError):
    pass


@dataclass(frozen=True)
class Caller:
    """Who a request comes from: the token's id and name, never the token."""

    token_id: str
    name: str
    scopes: frozenset[Scope]
    teams: frozenset[str] | None = None  # None: every team

    def may(self, scope: Scope) -> bool:
        return Scope.ADMIN in self.scopes or scope in self.scopes

    def sees(self, team: str | None) -> bool:
        """A job of this team (None: a job with no team) is this caller's to see."""
        return self.teams is None or team in self.teams

    def team_list(self) -> tuple[str, ...] | None:
        return tuple(sorted(self.teams)) if self.teams is not None else None


def parse_scopes(text: str) -> tuple[Scope, ...]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    try:
        scopes = tuple(dict.fromkeys(Scope(name) for name in names))
    except ValueError:
        known = ", ".join(s.value for s in Scope)
        raise UnknownScope(f"scopes are a comma-separated list of: {known}") from None
    if not scopes:
        raise UnknownScope("name at least one scope")
    return scopes


def parse_teams(names: list[str]) -> tuple[str, ...]:
    """Team names as jobs' `tags.team` spell them."""
    teams = tuple(dict.fromkeys(name.strip() for name in names if name.strip()))
    for team in teams:
        if not re.match(TAG_VALUE_PATTERN, team):
            raise BadTeam(f"{team!r} is not a team name a job's tags.team could carry")
    if not teams:
        raise BadTeam("name at least one team")
    return teams


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def create_token(
    book: TokenBookPort,
    name: str,
    scopes: tuple[Scope, ...],
    teams: tuple[str, ...] | None = None,
    expires_at: datetime | None = None,
) -> tuple[str, str]:
    """Store a new token's digest; returns (token id, the token), the token for showing once.
    `teams` None: every team's (an operator's token)."""
    token_id = secrets.token_hex(6)
    token = f"{TOKEN_PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
    book.add_token(token_id, name, tuple(s.value for s in scopes), digest(token), teams, expires_at)
    return token_id, token


def caller_of(book: TokenReader, token: str, now: datetime) -> Caller | None:
    """The live token's caller; None for a token that is unknown, revoked, expired or
    malformed."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > MAX_TOKEN_CHARS:
        return None
    stored = book.token_with_digest(digest(token))
    if stored is None or stored.revoked_at is not None:
        return None
    if stored.expires_at is not None and stored.expires_at <= now:
        return None
    scopes = frozenset(Scope(s) for s in stored.scopes if s in Scope.__members__.values())
    teams = frozenset(stored.teams) if stored.teams is not None else None
    return Caller(stored.token_id, stored.name, scopes, teams)
