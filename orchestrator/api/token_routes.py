"""/v1/tokens (issue 49): API tokens made, listed and revoked over HTTP, so a deployment's
operator needs no `aws ecs run-task` for a new producer's token. An admin token of every team
only; a new token is shown once, in the answer that made it (the store keeps its digest)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Response
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from kernel.job_spec import TAG_VALUE_PATTERN
from orchestrator.api.auth import Scope, create_token
from orchestrator.api.jobs_routes import ERRORS
from orchestrator.api.models import Problem
from orchestrator.api.security import Administrator, Services
from orchestrator.store.tokens import StoredToken

router = APIRouter(prefix="/v1", tags=["tokens"])
ID_PATTERN = r"^[0-9a-f]{12}$"  # `create_token`'s ids
NAME_PATTERN = r"^[A-Za-z0-9 _.:/=+@-]{1,100}$"  # printable: it is shown in logs and lists
Team = Annotated[str, Field(pattern=TAG_VALUE_PATTERN)]


class TokenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, description="who or what uses it: `ci-render`")
    scopes: list[Scope] = Field(min_length=1, max_length=4)
    teams: list[Team] | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="the teams whose jobs it sees and moves; absent: every team's",
    )
    expires_at: AwareDatetime | None = Field(default=None, description="absent: never")


class TokenView(BaseModel):
    token_id: str
    name: str
    scopes: list[str]
    teams: list[str] | None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None


class NewToken(TokenView):
    token: str = Field(description="shown this once: the store keeps only its digest")


class TokenList(BaseModel):
    tokens: list[TokenView]


def token_view(stored: StoredToken) -> TokenView:
    return TokenView(
        token_id=stored.token_id,
        name=stored.name,
        scopes=list(stored.scopes),
        teams=list(stored.teams) if stored.teams is not None else None,
        created_at=stored.created_at,
        expires_at=stored.expires_at,
        revoked_at=stored.revoked_at,
    )


@router.post(
    "/tokens",
    status_code=201,
    response_model=NewToken,
    responses={**ERRORS, 422: {"model": Problem}},
    summary="Make an API token (shown once)",
)
def make_token(request: TokenRequest, _: Administrator, services: Services) -> NewToken:
    if request.expires_at is not None and request.expires_at <= services.clock.now():
        raise HTTPException(422, "expires_at is past: a token must live a while")
    book = services.store.api_tokens
    teams = tuple(dict.fromkeys(request.teams)) if request.teams is not None else None
    scopes = tuple(dict.fromkeys(request.scopes))
    token_id, token = create_token(book, request.name, scopes, teams, request.expires_at)
    made = next(t for t in book.tokens() if t.token_id == token_id)
    return NewToken(**token_view(made).model_dump(), token=token)


@router.get("/tokens", response_model=TokenList, responses=ERRORS, summary="Every API token")
def list_tokens(_: Administrator, services: Services) -> TokenList:
    return TokenList(tokens=[token_view(t) for t in services.store.api_tokens.tokens()])


@router.delete(
    "/tokens/{token_id}",
    status_code=204,
    responses=ERRORS,
    summary="Revoke an API token (its next request is refused)",
)
def revoke_token(
    token_id: Annotated[str, Path(pattern=ID_PATTERN)],
    _: Administrator,
    services: Services,
) -> Response:
    if not services.store.api_tokens.revoke_token(token_id):
        raise HTTPException(404, f"no live token {token_id!r}")
    return Response(status_code=204)
