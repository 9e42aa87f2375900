"""`framefleet tokens create|list|revoke`: the API's and console's tokens. A new token is
printed once; the store keeps only its digest."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from kernel.errors import ConfigurationError, FrameFleetError
from orchestrator.api.auth import Scope, UnknownScope, create_token, parse_scopes
from orchestrator.aws.secrets import SecretWriter
from orchestrator.store.job_store import JobStore


def add_commands(commands: Any) -> None:
    tokens = commands.add_parser("tokens", help="API tokens: create, list, revoke")
    actions = tokens.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="a new token, printed once")
    create.add_argument("--name", required=True, help="who or what uses it")
    create.add_argument(
        "--scopes", default="read", help=f"comma-separated: {', '.join(s.value for s in Scope)}"
    )
    create.add_argument(
        "--into-secret",
        metavar="SECRET_ARN",
        help="write the token into this Secrets Manager secret instead of printing it",
    )
    actions.add_parser("list", help="every token, without the tokens themselves")
    revoke = actions.add_parser("revoke", help="revoke a token by its id")
    revoke.add_argument("token_id")


def run_command(
    args: argparse.Namespace,
    store: JobStore,
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
        token_id, token = create_token(store, args.name, scopes)
        if args.into_secret and secrets is not None:
            # A deployment's first token: into the secret, never into the task's log.
            try:
                secrets().put(args.into_secret, token)
            except FrameFleetError:
                store.revoke_token(token_id)  # nobody can have it: no live token left behind
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
        for column in ("id", "name", "scopes", "created", "revoked"):
            table.add_column(column)
        for stored in store.tokens():
            table.add_row(
                stored.token_id,
                stored.name,
                ",".join(stored.scopes),
                f"{stored.created_at:%Y-%m-%d %H:%M} UTC",
                f"{stored.revoked_at:%Y-%m-%d %H:%M} UTC" if stored.revoked_at else "-",
            )
        console.print(table)
    elif not store.revoke_token(args.token_id):
        raise ConfigurationError(f"no live token {args.token_id!r}")
    else:
        console.print(f"revoked {args.token_id}")
