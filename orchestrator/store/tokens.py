"""API tokens in the store: digests and scopes, never the tokens themselves."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import update
from sqlmodel import col, select

from orchestrator.store.base import StoreBase, utc
from orchestrator.store.tables import ApiTokenRow


@dataclass(frozen=True)
class StoredToken:
    token_id: str
    name: str
    scopes: tuple[str, ...]
    created_at: datetime
    revoked_at: datetime | None
    teams: tuple[str, ...] | None = None  # None: every team
    expires_at: datetime | None = None  # None: never


def _token(row: ApiTokenRow) -> StoredToken:
    return StoredToken(
        row.token_id,
        row.name,
        tuple(scope for scope in row.scopes.split(",") if scope),
        utc(row.created_at),
        utc(row.revoked_at) if row.revoked_at else None,
        tuple(team for team in row.teams.split(",") if team) if row.teams is not None else None,
        utc(row.expires_at) if row.expires_at else None,
    )


class TokenBook(StoreBase):
    def add_token(
        self,
        token_id: str,
        name: str,
        scopes: tuple[str, ...],
        sha256: str,
        teams: tuple[str, ...] | None = None,
        expires_at: datetime | None = None,
    ) -> None:
        with self._session() as session:
            session.add(
                ApiTokenRow(
                    token_id=token_id,
                    name=name,
                    scopes=",".join(scopes),
                    sha256=sha256,
                    created_at=self._clock.now(),
                    teams=",".join(teams) if teams is not None else None,
                    expires_at=expires_at,
                )
            )
            session.commit()

    def tokens(self) -> list[StoredToken]:
        with self._session() as session:
            rows = session.exec(select(ApiTokenRow).order_by(col(ApiTokenRow.created_at))).all()
        return [_token(row) for row in rows]

    def token_with_digest(self, sha256: str) -> StoredToken | None:
        """The token with this digest, revoked or not (the caller decides)."""
        with self._session() as session:
            row = session.exec(select(ApiTokenRow).where(col(ApiTokenRow.sha256) == sha256)).first()
        return _token(row) if row is not None else None

    def revoke_token(self, token_id: str) -> bool:
        """False when no such token was live."""
        with self._session() as session:
            result = session.exec(
                update(ApiTokenRow)
                .where(col(ApiTokenRow.token_id) == token_id)
                .where(col(ApiTokenRow.revoked_at).is_(None))
                .values(revoked_at=self._clock.now())
            )
            session.commit()
        return bool(result.rowcount)
