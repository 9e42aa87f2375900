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
from kernel.input_spec import s3_object_problem
from kernel.model_family import ModelFamily
from kernel.precision import Precision

MODEL_MANIFEST = "framefleet-model.json"
# "<dtype>/<resolution class>": bf16/480p, fp16/720p, fp32/1080p.
MEMORY_KEY_PATTERN = r"^(bf16|fp16|fp32)/(480p|720p|1080p)$"


class ModelEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    uri: str = Field(description="s3://bucket/prefix/ of the published model")
    revision: str = Field(pattern=r"^[A-Za-z0-9._-]{1,64}$")
    # Which renderer steps it (`kernel/model_family.py`); Wan 2.1 text-to-video unless told.
    family: ModelFamily = ModelFamily.WAN21_T2V
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


class AdapterEntry(BaseModel):
    """A LoRA adapter published for the teams to name (`adapters: [{"name": ...}]`): its
    safetensors file and the model it was trained on (a job on another model is refused)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    uri: str = Field(description="s3://bucket/key.safetensors")
    base: str = Field(description="the registry's name of the model it applies to")

    @field_validator("uri")
    @classmethod
    def _object(cls, uri: str) -> str:
        problem = s3_object_problem(uri)
        if problem is not None or not uri.endswith(".safetensors"):
            raise ValueError(problem or "must name a .safetensors file")
        return uri


class ModelRegistry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    models: dict[str, ModelEntry]
    adapters: dict[str, AdapterEntry] = Field(default_factory=dict)

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
