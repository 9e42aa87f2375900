"""API tokens: scoped, stored as SHA-256 digests, checked on every request.

A token is `ff_<id>_<secret>`: the id names it in lists and logs, the secret (32 random bytes)
is shown once at creation. Only the digest of the whole token is stored, so a copy of the
database grants nothing; a fast digest is enough for a secret of 256 random bits.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from kernel.errors import FrameFleetError
from orchestrator.store.tokens import StoredToken

TOKEN_PREFIX = "ff_"  # noqa: S105 (the prefix every token starts with, not a secret)
MAX_TOKEN_CHARS = 128  # anything longer is not one of ours: refused before it is hashed


class Scope(StrEnum):
    SUBMIT = "submit"
    READ = "read"
    CANCEL = "cancel"
    ADMIN = "admin"  # every scope


class TokenBookPort(Protocol):
    def add_token(self, token_id: str, name: str, scopes: tuple[str, ...], sha256: str) -> None: ...

    def token_with_digest(self, sha256: str) -> StoredToken | None: ...


class UnknownScope(FrameFleetError):
    pass


@dataclass(frozen=True)
class Caller:
    """Who a request comes from: the token's id and name, never the token."""

    token_id: str
    name: str
    scopes: frozenset[Scope]

    def may(self, scope: Scope) -> bool:
        return Scope.ADMIN in self.scopes or scope in self.scopes


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


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def create_token(book: TokenBookPort, name: str, scopes: tuple[Scope, ...]) -> tuple[str, str]:
    """Store a new token's digest; returns (token id, the token), the token for showing once."""
    token_id = secrets.token_hex(6)
    token = f"{TOKEN_PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
    book.add_token(token_id, name, tuple(s.value for s in scopes), digest(token))
    return token_id, token


def caller_of(book: TokenBookPort, token: str) -> Caller | None:
    """The live token's caller; None for a token that is unknown, revoked or malformed."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > MAX_TOKEN_CHARS:
        return None
    stored = book.token_with_digest(digest(token))
    if stored is None or stored.revoked_at is not None:
        return None
    scopes = frozenset(Scope(s) for s in stored.scopes if s in Scope.__members__.values())
    return Caller(stored.token_id, stored.name, scopes)
