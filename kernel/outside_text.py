"""Text that came from outside (producers, workers, AWS) made safe to log or print.

Control characters and other non-printables are escaped (a newline becomes `\\n`, an escape
byte `\\x1b`), so a message cannot forge log lines or drive the operator's terminal, and long
text is cut. Markup is the printer's business: the CLI hands such text to rich as plain `Text`.
"""

from __future__ import annotations

from pydantic import ValidationError

DEFAULT_LIMIT = 500


def printable(text: str, limit: int = DEFAULT_LIMIT) -> str:
    cut = text[:limit]
    safe = "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in cut
    )
    return safe + ("..." if len(text) > limit else "")


def printable_bytes(payload: bytes, limit: int = DEFAULT_LIMIT) -> str:
    """A payload that may not even be UTF-8: undecodable bytes become `\\xNN`."""
    return printable(payload[: limit * 4].decode("utf-8", "backslashreplace"), limit)


def first_problem(error: ValidationError) -> tuple[str, str]:
    """(where, what) of a validation error's first problem, without the input value; field
    names can come from the input, so they are made printable."""
    first = error.errors(include_input=False, include_url=False)[0]
    return ".".join(printable(str(part), 64) for part in first["loc"]), first["msg"]
