"""What a job brings beyond its prompt: an input image (image-to-video) and LoRA adapters on
its base model. Each names an S3 object (or, for an adapter, an entry of the model registry);
whether the object exists and is of a size and type the worker takes is checked at the door
(`orchestrator/intake/model_door.py`), the rest by the worker on its first attempt.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, model_validator

# An S3 object (not a prefix): the bucket per S3's naming rules, a key of safe characters.
S3_OBJECT_RE = re.compile(
    r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/[A-Za-z0-9!_.*'()/-]{0,899}[A-Za-z0-9!_.*'()-]$"
)
ADAPTER_NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}(/[a-z0-9][a-z0-9_.-]{0,63})?$"
MAX_ADAPTERS = 4
# A LoRA's scale: 1 applies it as trained; past 2 (or below -2) a fine-tune's effect swamps its
# base model's and the video comes apart.
MAX_ADAPTER_WEIGHT = 2.0
# What the door takes as an input image, and how large.
IMAGE_TYPES = ("png", "jpeg", "webp")
MAX_IMAGE_BYTES = 20 * 2**20
MAX_ADAPTER_BYTES = 2 * 2**30


def s3_object_problem(uri: str) -> str | None:
    if not S3_OBJECT_RE.match(uri) or "//" in uri[5:] or "/../" in uri or uri.endswith("/.."):
        return "must be s3://bucket/key of one object, with a valid bucket name"
    return None


class AdapterRef(BaseModel):
    """One LoRA adapter: an S3 object of safetensors weights, or a name in the registry's
    `adapters`, applied at `weight`."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    uri: str | None = Field(
        default=None,
        max_length=1024,
        description="s3://bucket/key.safetensors of the adapter",
        exclude_if=lambda value: value is None,
    )
    name: str | None = Field(
        default=None,
        pattern=ADAPTER_NAME_PATTERN,
        description="An adapter in the registry",
        exclude_if=lambda value: value is None,
    )
    weight: float = Field(
        default=1.0,
        ge=-MAX_ADAPTER_WEIGHT,
        le=MAX_ADAPTER_WEIGHT,
        allow_inf_nan=False,
        description="Its scale: 1 as trained, 0 off",
    )

    @model_validator(mode="after")
    def _one_source(self) -> AdapterRef:
        if (self.uri is None) == (self.name is None):
            raise ValueError("name exactly one of uri (an S3 object) or name (in the registry)")
        if self.uri is not None:
            problem = s3_object_problem(self.uri)
            if problem is not None:
                raise ValueError(f"uri {problem}")
            if not self.uri.endswith(".safetensors"):
                raise ValueError("uri must name a .safetensors file (nothing pickled is loaded)")
        return self

    @property
    def source(self) -> str:
        return self.uri or f"registry:{self.name}"


def image_type(head: bytes) -> str | None:
    """The image type its first bytes say (PNG, JPEG, WebP), or None: not one the worker
    reads. What the object's name or Content-Type claims is not trusted."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    return None
