"""The model registry: name -> where the published model lies, its revision, its precision and
the GPU memory its renders were measured to need. One JSON document (`{"models": {...}}`) in S3
(`model_registry_uri`) that the workers resolve models through and the control plane checks
jobs against at the door.

A published model's own manifest (`framefleet-model.json`, beside its files) lists each file
with its size; the control plane reads the weights' size there for a model no measurement
covers yet (`kernel/model_memory.py`).
"""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kernel.errors import ConfigurationError
from kernel.precision import Precision

MODEL_MANIFEST = "framefleet-model.json"
# "<dtype>/<resolution class>": bf16/480p, fp16/720p, fp32/1080p.
MEMORY_KEY_PATTERN = r"^(bf16|fp16|fp32)/(480p|720p|1080p)$"


class ModelEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    uri: str = Field(description="s3://bucket/prefix/ of the published model")
    revision: str = Field(pattern=r"^[A-Za-z0-9._-]{1,64}$")
    # The dtype it computes in and the components kept in fp32 (bf16 with an fp32 VAE unless
    # the registry says otherwise).
    precision: Precision = Field(default_factory=Precision)
    # Measured peak GPU memory of a render (GiB) per "<dtype>/<resolution class>"; where one
    # is missing the need is estimated, never below the weights.
    memory_gib: dict[str, float] = Field(default_factory=dict)

    @field_validator("memory_gib")
    @classmethod
    def _memory_keys(cls, memory: dict[str, float]) -> dict[str, float]:
        for key, gib in memory.items():
            if not re.match(MEMORY_KEY_PATTERN, key) or not 0 < gib <= 4096:
                raise ValueError(f"{key!r}: {gib} (want e.g. 'bf16/480p': 46.8)")
        return memory


class ModelRegistry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    models: dict[str, ModelEntry]

    @classmethod
    def parse(cls, raw: bytes | str, where: str) -> ModelRegistry:
        try:
            return cls.model_validate_json(raw)
        except ValidationError as error:
            raise ConfigurationError(
                f"model registry {where}: {error.error_count()} problems: {error}"
            ) from None


def weights_bytes(manifest: bytes | str) -> int | None:
    """The size of a published model's weights (its .safetensors files), from its manifest;
    None when the manifest says nothing usable (the model is then only checked by name)."""
    try:
        files = json.loads(manifest).get("files", {})
        sizes = [
            int(digest["size"])
            for path, digest in files.items()
            if isinstance(path, str) and path.endswith(".safetensors")
        ]
    except (ValueError, TypeError, AttributeError, KeyError):
        return None
    return sum(sizes) if sizes and all(size >= 0 for size in sizes) else None
