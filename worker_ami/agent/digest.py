"""SHA-256 and size of a blob: how checkpoints and published models prove their bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class Digest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)

    @classmethod
    def of(cls, data: bytes) -> Digest:
        return cls(sha256=hashlib.sha256(data).hexdigest(), size=len(data))

    def matches(self, data: bytes) -> bool:
        return len(data) == self.size and hashlib.sha256(data).hexdigest() == self.sha256

    def matches_file(self, path: Path) -> bool:
        """The same of a file, read in chunks (a model's weights need not fit in memory)."""
        if path.stat().st_size != self.size:
            return False
        with path.open("rb") as file:
            return hashlib.file_digest(file, "sha256").hexdigest() == self.sha256
