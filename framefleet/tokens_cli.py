"""`framefleet tokens create|list|revoke`: the API's and console's tokens. A new token is
printed once; the store keeps only its digest."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from rich.console import Console
from rich.table import Table

from framefleet.remote_tables import with_output
from kernel.clock import SystemClock
from kernel.errors import ConfigurationError, FrameFleetError
from orchestrator.api.auth import (
    BadTeam,
    Scope,
    UnknownScope,
    create_token,
    parse_scopes,
    parse_teams,
)
from orchestrator.aws.secrets import SecretWriter
from orchestrator.store.tokens import TokenBook

MAX_DAYS = 3650


def add_commands(commands: Any) -> None:
    tokens = commands.add_parser("tokens", help="API tokens: create, list, revoke")
    actions = tokens.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="a new token, printed once")
    create.add_argument("--name", required=True, help="who or what uses it")
    create.add_argument(
        "--scopes", default="read", help=f"comma-separated: {', '.join(s.value for s in Scope)}"
    )
    create.add_argument(
        "--team",
        action="append",
        default=[],
        help="a team whose jobs it may see and submit (repeat for more); none: every team's",
    )
    create.add_argument(
        "--expires-in-days", type=float, help="it stops working after this many days"
    )
    create.add_argument(
        "--into-secret",
        metavar="SECRET_ARN",
        help="write the token into this Secrets Manager secret instead of printing it",
    )
    with_output(actions.add_parser("list", help="every token, without the tokens themselves"))
    revoke = actions.add_parser("revoke", help="revoke a token by its id")
    revoke.add_argument("token_id")


def run_command(
    args: argparse.Namespace,
    tokens: TokenBook,
    console: Console,
    secrets: Callable[[], SecretWriter] | None = None,
) -> None:
    """`secrets` makes the Secrets Manager writer `--into-secret` needs."""
    if args.action == "create":
        if not 1 <= len(args.name) <= 128:
            raise ConfigurationError("--name must be 1 to 128 characters")
        try:
            scopes = parse_scopes(args.scopes)
        except UnknownScope as error:
            raise ConfigurationError(str(error)) from None
        if args.into_secret and secrets is None:
            raise ConfigurationError("--into-secret needs AWS access")
        try:
            teams = parse_teams(args.team) if args.team else None
        except BadTeam as error:
            raise ConfigurationError(str(error)) from None
        expires_at = None
        if args.expires_in_days is not None:
            if not 0 < args.expires_in_days <= MAX_DAYS:
                raise ConfigurationError(f"--expires-in-days must be over 0 and at most {MAX_DAYS}")
            expires_at = SystemClock().now() + timedelta(days=args.expires_in_days)
        token_id, token = create_token(tokens, args.name, scopes, teams, expires_at)
        if args.into_secret and secrets is not None:
            # A deployment's first token: into the secret, never into the task's log.
            try:
                secrets().put(args.into_secret, token)
            except FrameFleetError:
                tokens.revoke_token(token_id)  # nobody can have it: no live token left behind
                raise
            written = f"token {token_id} ({', '.join(scopes)}) written to {args.into_secret}"
            console.print(written, markup=False, emoji=False, highlight=False)
            return
        console.print(
            f"token {token_id} ({', '.join(scopes)}); shown once, keep it safe:", highlight=False
        )
        print(token)  # plain stdout: `TOKEN=$(framefleet tokens create ...)`-friendly
    elif args.action == "list":
        table = Table(title="API tokens")
        for column in ("id", "name", "scopes", "teams", "created", "expires", "revoked"):
            table.add_column(column)
        for stored in tokens.tokens():
            table.add_row(
                stored.token_id,
                stored.name,
                ",".join(stored.scopes),
                ",".join(stored.teams) if stored.teams is not None else "every team",
                f"{stored.created_at:%Y-%m-%d %H:%M} UTC",
                f"{stored.expires_at:%Y-%m-%d %H:%M} UTC" if stored.expires_at else "never",
                f"{stored.revoked_at:%Y-%m-%d %H:%M} UTC" if stored.revoked_at else "-",
            )
        console.print(table)
    elif not tokens.revoke_token(args.token_id):
        raise ConfigurationError(f"no live token {args.token_id!r}")
    else:
        console.print(f"revoked {args.token_id}")
