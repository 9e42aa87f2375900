"""What a job brings beyond its spec, fetched by the agent before its render opens: the input
image of an image-to-video job and the files of its LoRA adapters, each on local disk (the
render process never talks to S3)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class AdapterFile:
    """One LoRA adapter of a job: its file, the weight it is applied with, and its content's
    SHA-256 (what a checkpoint records, so that a resume under another file is refused)."""

    path: Path
    weight: float
    sha256: str

    @property
    def name(self) -> str:
        # diffusers names adapters; the content's digest names the same file the same way.
        return f"a{self.sha256[:16]}"


@dataclass(frozen=True)
class JobInputs:
    image: Path | None = None
    adapters: tuple[AdapterFile, ...] = ()

    def to_wire(self) -> dict[str, Any]:
        return {
            "image": None if self.image is None else str(self.image),
            "adapters": [[str(a.path), a.weight, a.sha256] for a in self.adapters],
        }

    @classmethod
    def from_wire(cls, raw: dict[str, Any] | None) -> JobInputs:
        if not raw:
            return NO_INPUTS
        image = raw.get("image")
        return cls(
            image=None if image is None else Path(str(image)),
            adapters=tuple(
                AdapterFile(Path(str(path)), float(weight), str(digest))
                for path, weight, digest in raw.get("adapters") or ()
            ),
        )


NO_INPUTS = JobInputs()
