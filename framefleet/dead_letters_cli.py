"""`framefleet dead-letters` in the database mode: the dead-letter queue read without taking
its messages, one sent to the jobs queue again, or one dropped (SQS itself)."""

from __future__ import annotations

import argparse
import json

import boto3
from rich.console import Console
from rich.table import Table

from framefleet.remote_tables import outside
from framefleet.settings import Settings
from kernel.errors import NotFound
from orchestrator.aws.dead_letters import (
    DeadLetter,
    discard_dead_letter,
    peek_dead_letters,
    redrive_dead_letter,
)


def dead_letters(settings: Settings, args: argparse.Namespace, console: Console) -> None:
    jobs_url, dead_letter_url = settings.require_queues()
    sqs = boto3.client("sqs", region_name=settings.region, endpoint_url=settings.endpoint_url)
    if args.action == "redrive":
        done = redrive_dead_letter(sqs, dead_letter_url, jobs_url, args.message_id)
    elif args.action == "delete":
        done = discard_dead_letter(sqs, dead_letter_url, args.message_id)
    else:
        console.print(dead_letter_table(peek_dead_letters(sqs, dead_letter_url)))
        return
    if not done:
        raise NotFound(f"no dead letter {args.message_id!r}: gone, or never there")
    console.print(f"{args.action}: {args.message_id}")


def dead_letter_table(letters: list[DeadLetter]) -> Table:
    table = Table(title=f"dead-letter queue ({len(letters)})")
    for column in ("original message", "reason", "errors", "body"):
        table.add_column(column, overflow="fold")
    for letter in letters:
        table.add_row(
            outside(letter.original_message_id, 8),
            outside(letter.reason, 64),
            outside("\n".join(_error_lines(letter.errors)), 2000, keep_newlines=True),
            outside(letter.body, 57),
        )
    return table


def _error_lines(errors: str) -> list[str]:
    """The errors attribute is a JSON list we wrote, but the queue is open to anyone who may
    send to it: anything else is shown as it is."""
    try:
        parsed = json.loads(errors) if errors else []
    except (ValueError, RecursionError):
        return [errors]
    if isinstance(parsed, list) and all(isinstance(line, str) for line in parsed):
        return parsed
    return [errors]
