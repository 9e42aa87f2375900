"""Checkpoints of the denoising state in S3.

Layout: `{root}/{job_id}/{attempt}/{step:06d}/` holding `latents.safetensors`,
`scheduler.safetensors`, `rng.safetensors` and `manifest.json`, written last. A checkpoint
counts only once its manifest is durable. The manifest names the recipe the state was computed
with (dtypes, GPU family, guidance layout, attention kernel): a resume in another dtype is
refused, one across families or recipes only for a job that asked for `exact`. Tensors use
safetensors: reading a checkpoint can never execute code (nothing is ever unpickled).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worker_ami.agent.denoise_state import DenoiseState
from worker_ami.agent.digest import Digest
from worker_ami.agent.errors import CheckpointRejected, ObjectNotFound
from worker_ami.agent.object_store import ObjectStore
from worker_ami.agent.recipe import RenderRecipe
from worker_ami.agent.state_codec import BLOB_NAMES, EMBEDDINGS, decode_state, encode_state

log = logging.getLogger(__name__)

CHECKPOINT_SCHEMA = "framefleet.checkpoint/v1"
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 64 * 1024


class CheckpointIdentity(BaseModel):
    """What a checkpoint must match to be resumed by this job on this pipeline."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    job_id: str
    job_spec_sha256: str
    model: str
    model_revision: str
    pipeline_config_sha256: str
    total_steps: int
    # The LoRA adapters applied, "<sha256 of the file>@<weight>" each, in the job's order: a
    # resume under another file or weight is refused (empty: none, as before adapters).
    adapters: tuple[str, ...] = ()


class CheckpointManifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    schema_tag: Literal["framefleet.checkpoint/v1"] = Field(alias="schema")
    identity: CheckpointIdentity
    attempt: int = Field(ge=0)
    step: int = Field(ge=0)
    blobs: dict[str, Digest]
    created_at: datetime
    # None: written before recipes were recorded, when every render ran in fp32.
    recipe: RenderRecipe | None = None


def made_with(manifest: CheckpointManifest) -> RenderRecipe:
    if manifest.recipe is not None:
        return manifest.recipe
    return LEGACY_RECIPE


LEGACY_RECIPE = RenderRecipe.model_validate(
    {
        "dtypes": {"transformer": "fp32", "text_encoder": "fp32", "vae": "fp32"},
        "gpu_family": "unknown",
        "cfg": "sequential",
        "attention": "default",
    }
)


@dataclass(frozen=True)
class ResumeRule:
    """What a checkpoint must have been computed with to be resumed here."""

    recipe: RenderRecipe
    exact: bool = False


@dataclass(frozen=True)
class ResumePoint:
    """Where a run starts: a verified checkpoint, or step 0 with the reasons why. A stage of
    a split render finds the prompt's embeddings there too (and the encoding stage's
    checkpoint holds nothing else: `state` None)."""

    state: DenoiseState | None
    manifest_key: str | None
    notes: tuple[str, ...] = field(default_factory=tuple)
    embeddings: dict[str, bytes] | None = None


@dataclass(frozen=True)
class StoredCheckpoint:
    state: DenoiseState | None
    embeddings: dict[str, bytes] | None
    recipe: RenderRecipe
    # Its state was refused here (another dtype, mid-denoising): only its embeddings are
    # taken, and why.
    state_refused: str | None = None
    boundary: bool = False  # nothing mid-denoising in it: it may cross dtypes


# The blobs a checkpoint may hold: a state; a state and the embeddings (a denoising stage's);
# the embeddings alone, at step 0 (an encoding stage's).
_BLOB_SETS = (
    frozenset(BLOB_NAMES),
    frozenset((*BLOB_NAMES, EMBEDDINGS)),
    frozenset((EMBEDDINGS,)),
)


def parse_checkpoint_manifest(raw: bytes) -> CheckpointManifest:
    """Total: a manifest, or CheckpointRejected for anything else (S3 is outside input)."""
    if len(raw) > MAX_MANIFEST_BYTES:
        raise CheckpointRejected(f"manifest of {len(raw)} bytes")
    try:
        return CheckpointManifest.model_validate_json(raw, strict=True)
    except ValidationError:
        raise CheckpointRejected("manifest unreadable or truncated") from None


def _parse_key(key: str) -> tuple[int, int] | None:
    """(step, attempt) of `.../{attempt}/{step}/manifest.json`, or None for other keys."""
    parts = key.split("/")
    if len(parts) < 4 or parts[-1] != MANIFEST:
        return None
    try:
        return int(parts[-2]), int(parts[-3])
    except ValueError:
        return None


class CheckpointStore:
    def __init__(
        self, objects: ObjectStore, bucket: str, root: str = "checkpoints", keep: int = 2
    ) -> None:
        self._objects = objects
        self.bucket = bucket
        self._root = root.strip("/")
        self._keep = keep

    def job_prefix(self, job_id: str) -> str:
        return f"{self._root}/{job_id}/"

    def checkpoint_prefix(self, job_id: str, attempt: int, step: int) -> str:
        return f"{self.job_prefix(job_id)}{attempt}/{step:06d}/"

    async def write(
        self,
        state: DenoiseState,
        identity: CheckpointIdentity,
        attempt: int,
        now: datetime,
        recipe: RenderRecipe | None = None,
    ) -> str:
        """Upload the blobs, then the manifest; returns the manifest key once it is durable."""
        blobs = encode_state(state)
        return await self.write_encoded(blobs, state.step, identity, attempt, now, recipe)

    async def write_encoded(
        self,
        blobs: dict[str, bytes],
        step: int,
        identity: CheckpointIdentity,
        attempt: int,
        now: datetime,
        recipe: RenderRecipe | None = None,
    ) -> str:
        """`write` for a state already encoded (`encode_state`, as a render process does)."""
        prefix = self.checkpoint_prefix(identity.job_id, attempt, step)
        await asyncio.gather(
            *(self._objects.put(self.bucket, prefix + name, data) for name, data in blobs.items())
        )
        manifest = CheckpointManifest(
            schema_tag=CHECKPOINT_SCHEMA,
            identity=identity,
            attempt=attempt,
            step=step,
            blobs={name: Digest.of(data) for name, data in blobs.items()},
            created_at=now,
            recipe=recipe,
        )
        key = prefix + MANIFEST
        await self._objects.put(self.bucket, key, manifest.model_dump_json(by_alias=True).encode())
        await self._prune(identity.job_id)
        return key

    async def manifests(self, job_id: str) -> list[str]:
        """Manifest keys of this job, newest (highest step, then attempt) first."""
        keys = await self._objects.list_keys(self.bucket, self.job_prefix(job_id))
        ranked = [(rank, key) for key in keys if (rank := _parse_key(key)) is not None]
        return [key for _, key in sorted(ranked, reverse=True)]

    async def load(
        self, manifest_key: str, expected: CheckpointIdentity, rule: ResumeRule | None = None
    ) -> tuple[DenoiseState, RenderRecipe]:
        """The state and the recipe it was computed with (refused against `rule`)."""
        stored = await self.load_stored(manifest_key, expected, rule)
        if stored.state is None:
            raise CheckpointRejected("checkpoint holds no denoising state")
        return stored.state, stored.recipe

    async def load_stored(
        self, manifest_key: str, expected: CheckpointIdentity, rule: ResumeRule | None = None
    ) -> StoredCheckpoint:
        """What the checkpoint holds (a state, embeddings, or both) and the recipe it was
        computed with (refused against `rule`)."""
        try:
            raw = await self._objects.get(self.bucket, manifest_key)
        except ObjectNotFound:
            raise CheckpointRejected("manifest missing") from None
        manifest = parse_checkpoint_manifest(raw)
        if manifest.identity != expected:
            if manifest.identity.model_copy(update={"adapters": expected.adapters}) == expected:
                raise CheckpointRejected(
                    "checkpoint made with other LoRA adapters (file or weight)"
                )
            raise CheckpointRejected("checkpoint belongs to another job, model or pipeline")
        names = frozenset(manifest.blobs)
        boundary = names == {EMBEDDINGS} or manifest.step == expected.total_steps
        refusal = None
        if rule is not None:
            refusal = rule.recipe.resume_refusal(made_with(manifest), rule.exact, boundary)
            if refusal is not None and (rule.exact or EMBEDDINGS not in names):
                raise CheckpointRejected(refusal)
        if names not in _BLOB_SETS or (BLOB_NAMES[0] not in names and manifest.step != 0):
            raise CheckpointRejected("manifest lists the wrong blobs")
        prefix = manifest_key.removesuffix(MANIFEST)
        blobs: dict[str, bytes] = {}
        for name, digest in manifest.blobs.items():
            try:
                data = await self._objects.get(self.bucket, prefix + name)
            except ObjectNotFound:
                raise CheckpointRejected(f"blob {name} missing") from None
            if not digest.matches(data):
                raise CheckpointRejected(f"blob {name} fails its SHA-256")
            blobs[name] = data
        embeddings = {EMBEDDINGS: blobs.pop(EMBEDDINGS)} if EMBEDDINGS in blobs else None
        if refusal is not None:  # the state stays unused; the embeddings cross as at a boundary
            return StoredCheckpoint(None, embeddings, made_with(manifest), refusal, True)
        if not blobs:
            return StoredCheckpoint(None, embeddings, made_with(manifest), boundary=True)
        state = decode_state(blobs)
        if state.step != manifest.step or state.total_steps != expected.total_steps:
            raise CheckpointRejected("tensors disagree with the manifest")
        return StoredCheckpoint(state, embeddings, made_with(manifest), boundary=boundary)

    async def resume_point(
        self,
        expected: CheckpointIdentity,
        preferred: str | None = None,
        rule: ResumeRule | None = None,
    ) -> ResumePoint:
        """The newest checkpoint that verifies and `rule` allows (trying `preferred` first),
        else step 0. A resume across recipes says so in the notes."""
        candidates = await self.manifests(expected.job_id)
        notes: list[str] = []
        if preferred is not None and not (
            preferred.startswith(self.job_prefix(expected.job_id)) and _parse_key(preferred)
        ):
            notes.append(f"ignored {preferred}: not a checkpoint of job {expected.job_id}")
            preferred = None
        if preferred is not None:
            candidates = [preferred] + [key for key in candidates if key != preferred]
        embeddings_only: tuple[str, StoredCheckpoint] | None = None
        for key in candidates:
            try:
                stored = await self.load_stored(key, expected, rule)
            except CheckpointRejected as error:
                notes.append(f"rejected {key}: {error}")
                log.warning("checkpoint %s rejected: %s", key, error)
                continue
            if stored.state_refused is not None:
                # An older checkpoint's state may still be usable here: look on first.
                notes.append(f"state of {key} refused: {stored.state_refused}")
                embeddings_only = embeddings_only or (key, stored)
                continue
            return _resume_at(key, stored, notes, rule)
        if embeddings_only is not None:
            key, stored = embeddings_only
            notes.append(f"denoising starts again from step 0 on the embeddings of {key}")
            return _resume_at(key, stored, notes, rule)
        if candidates:
            notes.append("no checkpoint verified: restarting from step 0")
        return ResumePoint(None, None, tuple(notes))

    async def _prune(self, job_id: str) -> None:
        manifests = await self.manifests(job_id)
        for stale in manifests[self._keep :]:
            prefix = stale.removesuffix(MANIFEST)
            # The manifest goes first so a half-deleted checkpoint is never a candidate.
            await self._objects.delete(self.bucket, [stale])
            names = (*BLOB_NAMES, EMBEDDINGS)
            await self._objects.delete(self.bucket, [prefix + name for name in names])

    async def delete_all(self, job_id: str) -> None:
        keys = await self._objects.list_keys(self.bucket, self.job_prefix(job_id))
        if keys:
            await self._objects.delete(self.bucket, keys)


def _resume_at(
    key: str, stored: StoredCheckpoint, notes: list[str], rule: ResumeRule | None
) -> ResumePoint:
    """Resume from `key`, with the notes its record carries (a fallback, a crossing)."""
    if notes and stored.state_refused is None:
        step = stored.state.step if stored.state is not None else 0
        notes.append(f"fell back to {key} (step {step})")
    if rule is not None:
        cast = rule.recipe.boundary_cast(stored.recipe) if stored.boundary else None
        crossing = rule.recipe.differs_from(stored.recipe)
        notes.extend(note for note in (cast, crossing) if note is not None)
    return ResumePoint(stored.state, key, tuple(notes), stored.embeddings)
