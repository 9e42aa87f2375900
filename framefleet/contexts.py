"""The CLI's contexts, as kubectl's: each a deployment's API URL and a token, by name, one
of them current. Kept in the user's config folder (`$XDG_CONFIG_HOME/framefleet/contexts.json`,
`~/.config/...` by default; `FRAMEFLEET_CLI_CONFIG` names another file), readable by the user
alone (0600, its folder 0700): it holds tokens."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from kernel.errors import ConfigurationError

FILE_MODE = 0o600


@dataclass(frozen=True)
class Context:
    name: str
    url: str
    token: str


def config_path() -> Path:
    named = os.environ.get("FRAMEFLEET_CLI_CONFIG")
    if named:
        return Path(named)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "framefleet" / "contexts.json"


@dataclass
class Contexts:
    current: str | None
    known: dict[str, Context]

    @classmethod
    def load(cls, path: Path | None = None) -> Contexts:
        path = path or config_path()
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return cls(None, {})
        except (OSError, ValueError) as error:
            raise ConfigurationError(f"cannot read the CLI's contexts {path}: {error}") from None
        try:
            known = {
                name: Context(name, str(entry["url"]), str(entry["token"]))
                for name, entry in data.get("contexts", {}).items()
            }
            current = data.get("current")
        except (AttributeError, KeyError, TypeError) as error:
            raise ConfigurationError(f"the CLI's contexts {path} are damaged: {error}") from None
        return cls(current if current in known else None, known)

    def save(self, path: Path | None = None) -> Path:
        path = path or config_path()
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        data = {
            "current": self.current,
            "contexts": {c.name: {"url": c.url, "token": c.token} for c in self.known.values()},
        }
        partial = path.with_name(path.name + ".partial")
        # Created 0600 from the start: the token is never readable by others, not even briefly.
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        with os.fdopen(descriptor, "w") as out:
            json.dump(data, out, indent=2)
        os.chmod(partial, FILE_MODE)  # an older file of another mode is replaced as 0600
        partial.replace(path)
        return path

    def add(self, context: Context) -> None:
        self.known[context.name] = context
        self.current = context.name

    def use(self, name: str) -> Context:
        if name not in self.known:
            raise ConfigurationError(f"no context {name!r}: {self.names()}")
        self.current = name
        return self.known[name]

    def remove(self, name: str) -> None:
        if self.known.pop(name, None) is None:
            raise ConfigurationError(f"no context {name!r}: {self.names()}")
        if self.current == name:
            self.current = None

    def selected(self, name: str | None) -> Context | None:
        """The context a command runs against: `name` (--context or FRAMEFLEET_CONTEXT),
        else the current one; None: the database mode (no login)."""
        name = name or os.environ.get("FRAMEFLEET_CONTEXT") or self.current
        if name is None:
            return None
        if name not in self.known:
            raise ConfigurationError(f"no context {name!r}: {self.names()}")
        return self.known[name]

    def names(self) -> str:
        return ", ".join(sorted(self.known)) or "none yet (framefleet login URL)"
