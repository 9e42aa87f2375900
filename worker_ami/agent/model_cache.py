"""Model registry (name -> S3 prefix and revision) and the local model cache.

A published model is a folder in S3 (what `save_pretrained` wrote) plus `framefleet-model.json`
listing each file's SHA-256. The cache downloads it once into a folder named by a hash of
name@revision (never by the name itself), verifies every file, and publishes the folder with an
atomic rename; it evicts least-recently-used models past a disk budget. The cache lives on disk,
so it survives a restart of the agent.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernel.clock import Clock
from kernel.job_spec import MODEL_NAME_PATTERN
from kernel.model_registry import MODEL_MANIFEST, AdapterEntry, ModelEntry
from kernel.model_registry import ModelRegistry as RegistryDocument
from worker_ami.agent.digest import Digest
from worker_ami.agent.errors import ModelCacheError, ObjectNotFound, UnknownModel, WorkerError
from worker_ami.agent.object_store import ObjectStore
from worker_ami.agent.s3_uri import split_s3_uri

COMPLETE_MARKER = ".complete"
LAST_USED = ".last_used"


class ModelRegistry(RegistryDocument):
    """The registry as a worker resolves it: an unknown model is the job's fault."""

    def resolve(self, name: str) -> ModelEntry:
        entry = self.models.get(name)
        if entry is None:
            raise UnknownModel(f"model {name!r} is not in the registry")
        return entry

    async def lookup(self, name: str) -> ModelEntry:
        return self.resolve(name)

    async def adapter(self, name: str) -> AdapterEntry:
        found = self.adapters.get(name)
        if found is None:
            raise UnknownModel(f"adapter {name!r} is not in the registry")
        return found

    @classmethod
    def from_file(cls, path: Path) -> ModelRegistry:
        try:
            return cls.model_validate_json(path.read_text())
        except (OSError, ValidationError) as error:
            raise ModelCacheError(f"cannot read model registry {path}: {error}") from None


class ModelLookup(Protocol):
    async def lookup(self, name: str) -> ModelEntry:
        """The model's entry; UnknownModel (the job's fault) when the registry lacks it."""
        ...

    async def adapter(self, name: str) -> AdapterEntry:
        """The published adapter's entry; UnknownModel when the registry lacks it."""
        ...


class LiveRegistry:
    """The registry file a worker resolves through, read again when a job names a model it
    does not hold (first fetched anew from `uri`, the registry in S3, where given): a model
    added to the registry runs on the workers already up, without a restart."""

    def __init__(self, path: Path, objects: ObjectStore | None = None, uri: str | None = None):
        self._path, self._objects, self._uri = path, objects, uri
        self._current = ModelRegistry.from_file(path)

    async def lookup(self, name: str) -> ModelEntry:
        found = self._current.models.get(name)
        if found is not None:
            return found
        await self._reload()
        return self._current.resolve(name)

    async def adapter(self, name: str) -> AdapterEntry:
        if name not in self._current.adapters:
            await self._reload()
        return await self._current.adapter(name)

    async def _reload(self) -> None:
        if self._objects is not None and self._uri:
            bucket, key = split_s3_uri(self._uri)
            try:
                data = await self._objects.get(bucket, key)
            except WorkerError as error:  # the file as it is still resolves the others
                raise ModelCacheError(f"model registry {self._uri} not read: {error}") from None
            try:  # parsed first: a broken registry in S3 never replaces a good file
                fetched = ModelRegistry.model_validate_json(data)
            except ValidationError as error:
                raise ModelCacheError(f"model registry {self._uri}: {error}") from None
            fresh = self._path.with_suffix(f".{uuid.uuid4().hex}.tmp")
            await asyncio.to_thread(fresh.write_bytes, data)
            await asyncio.to_thread(fresh.replace, self._path)  # atomic: never half a file
            self._current = fetched
        else:
            self._current = ModelRegistry.from_file(self._path)


class ModelManifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=MODEL_NAME_PATTERN)
    revision: str
    files: dict[str, Digest]

    def config_sha256(self) -> str:
        """Identity of the pipeline's configuration (every JSON file), for checkpoints."""
        configs = sorted(
            (path, d.sha256) for path, d in self.files.items() if path.endswith(".json")
        )
        return hashlib.sha256(json.dumps(configs).encode()).hexdigest()


# Weight formats that unpickle on load, i.e. run code from whoever published the model. Only
# safetensors weights are published, cached or loaded.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")


def refuse_pickled_weights(paths: Iterable[str]) -> None:
    pickled = sorted(p for p in paths if p.lower().endswith(PICKLE_SUFFIXES))
    if pickled:
        raise ModelCacheError(
            f"model has pickled weights ({', '.join(pickled[:5])}): only safetensors are loaded;"
            " re-save it with save_pretrained(..., safe_serialization=True)"
        )


def _parse_manifest(raw: bytes | str, where: str) -> ModelManifest:
    try:
        manifest = ModelManifest.model_validate_json(raw, strict=True)
    except ValidationError as error:
        raise ModelCacheError(
            f"unreadable {MODEL_MANIFEST} at {where}: {error.error_count()} problems"
        ) from None
    refuse_pickled_weights(manifest.files)
    return manifest


def _safe_relative(path: str) -> PurePosixPath:
    relative = PurePosixPath(path)
    if relative.is_absolute() or ".." in relative.parts or not relative.parts:
        raise ModelCacheError(f"model manifest names an unsafe path: {path!r}")
    return relative


async def publish_model(
    objects: ObjectStore, source: Path, uri: str, name: str, revision: str
) -> ModelManifest:
    """Upload a `save_pretrained` folder and its manifest (the manifest last)."""
    bucket, prefix = split_s3_uri(uri)
    files: dict[str, Digest] = {}
    paths = await asyncio.to_thread(lambda: sorted(p for p in source.rglob("*") if p.is_file()))
    refuse_pickled_weights(p.relative_to(source).as_posix() for p in paths)
    if not any(p.name.endswith(".safetensors") for p in paths):
        raise ModelCacheError(f"{source} holds no .safetensors weights")
    for path in paths:
        relative = path.relative_to(source).as_posix()
        data = await asyncio.to_thread(path.read_bytes)
        await objects.put(bucket, prefix + relative, data)
        files[relative] = Digest.of(data)
    manifest = ModelManifest(name=name, revision=revision, files=files)
    await objects.put(bucket, prefix + MODEL_MANIFEST, manifest.model_dump_json().encode())
    return manifest


class CachedModel(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    revision: str
    path: Path
    manifest: ModelManifest


class ModelCache:
    def __init__(self, objects: ObjectStore, root: Path, budget_bytes: int, clock: Clock) -> None:
        self._objects = objects
        # Absolute: a job's render process opens the model from its own temp directory.
        self._root = root.absolute()
        self._budget = budget_bytes
        self._clock = clock
        self._lock = asyncio.Lock()
        root.mkdir(parents=True, exist_ok=True)

    def _folder(self, name: str, revision: str) -> Path:
        return self._root / hashlib.sha256(f"{name}@{revision}".encode()).hexdigest()[:32]

    async def ensure(self, name: str, entry: ModelEntry) -> CachedModel:
        async with self._lock:
            folder = self._folder(name, entry.revision)
            if not await asyncio.to_thread((folder / COMPLETE_MARKER).exists):
                await self._download(name, entry, folder)
            manifest = await asyncio.to_thread(self._admit, folder)
            return CachedModel(
                name=name, revision=entry.revision, path=folder / "files", manifest=manifest
            )

    async def _download(self, name: str, entry: ModelEntry, folder: Path) -> None:
        bucket, prefix = split_s3_uri(entry.uri)
        try:
            raw = await self._objects.get(bucket, prefix + MODEL_MANIFEST)
        except ObjectNotFound:
            raise ModelCacheError(
                f"model {name!r} has no {MODEL_MANIFEST} at {entry.uri}"
            ) from None
        manifest = _parse_manifest(raw, entry.uri)
        if (manifest.name, manifest.revision) != (name, entry.revision):
            raise ModelCacheError(
                f"{entry.uri} holds {manifest.name}@{manifest.revision}, "
                f"registry says {name}@{entry.revision}"
            )
        partial = self._root / f".partial-{uuid.uuid4().hex}"
        try:
            for relative, digest in manifest.files.items():
                target = partial / "files" / _safe_relative(relative)
                target.parent.mkdir(parents=True, exist_ok=True)
                await self._objects.download(bucket, prefix + relative, target)
                if not await asyncio.to_thread(digest.matches_file, target):
                    raise ModelCacheError(f"model file {relative} fails its SHA-256")
            (partial / MODEL_MANIFEST).write_bytes(raw)
            (partial / COMPLETE_MARKER).touch()
            shutil.rmtree(folder, ignore_errors=True)
            partial.rename(folder)
        finally:
            shutil.rmtree(partial, ignore_errors=True)

    def _admit(self, folder: Path) -> ModelManifest:
        """Check a cached model, mark it used, and make room under the budget."""
        manifest = _parse_manifest((folder / MODEL_MANIFEST).read_bytes(), str(folder))
        self._check_sizes(folder, manifest)
        self._touch(folder)
        self._evict(keep=folder)
        return manifest

    @staticmethod
    def _check_sizes(folder: Path, manifest: ModelManifest) -> None:
        # A full re-hash of a multi-GB model on every job is too slow; sizes catch truncation,
        # and the download verified every byte.
        for relative, digest in manifest.files.items():
            path = folder / "files" / _safe_relative(relative)
            if not path.is_file() or path.stat().st_size != digest.size:
                shutil.rmtree(folder, ignore_errors=True)
                raise ModelCacheError(f"cached model file {relative} is damaged; evicted")

    def _touch(self, folder: Path) -> None:
        (folder / LAST_USED).write_text(self._clock.now().isoformat())

    def entries(self) -> Mapping[Path, tuple[datetime, int]]:
        """Complete cached models: folder -> (last used, bytes)."""
        found: dict[Path, tuple[datetime, int]] = {}
        for folder in self._root.iterdir():
            if not (folder / COMPLETE_MARKER).exists():
                continue
            last_used = datetime.fromisoformat((folder / LAST_USED).read_text())
            size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
            found[folder] = (last_used, size)
        return found

    def _evict(self, keep: Path) -> None:
        entries = self.entries()
        total = sum(size for _, size in entries.values())
        for folder, (_, size) in sorted(entries.items(), key=lambda item: item[1][0]):
            if total <= self._budget:
                break
            if folder == keep:
                continue
            shutil.rmtree(folder, ignore_errors=True)
            total -= size
