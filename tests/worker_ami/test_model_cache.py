"""The model cache: fetched once, verified, kept across restarts, evicted least recently used."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from kernel.clock import FakeClock
from kernel.model_registry import MODEL_MANIFEST, ModelEntry
from tests.support.renders import MODEL, REVISION, Buckets
from worker_ami.agent.errors import ModelCacheError, UnknownModel
from worker_ami.agent.model_cache import (
    LiveRegistry,
    ModelCache,
    ModelRegistry,
    publish_model,
)
from worker_ami.agent.object_store import S3ObjectStore

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


class CountingStore:
    """The real S3 adapter behind the port, counting downloads (a programmable fake)."""

    def __init__(self, inner: S3ObjectStore) -> None:
        self.inner = inner
        self.gets: list[str] = []

    async def put(self, bucket: str, key: str, data: bytes) -> None:
        await self.inner.put(bucket, key, data)

    async def put_if_absent(self, bucket: str, key: str, data: bytes, content_type: str) -> bool:
        return await self.inner.put_if_absent(bucket, key, data, content_type)

    async def get(self, bucket: str, key: str) -> bytes:
        self.gets.append(key)
        return await self.inner.get(bucket, key)

    async def download(self, bucket: str, key: str, path: Path) -> None:
        self.gets.append(key)
        await self.inner.download(bucket, key, path)

    async def list_keys(self, bucket: str, prefix: str) -> list[str]:
        return await self.inner.list_keys(bucket, prefix)

    async def delete(self, bucket: str, keys: Sequence[str]) -> None:
        await self.inner.delete(bucket, keys)


async def test_a_model_is_fetched_once_and_survives_a_restart(
    object_store: S3ObjectStore, published_model: ModelRegistry, tmp_path: Path
) -> None:
    counting = CountingStore(object_store)
    entry = published_model.resolve(MODEL)
    cache = ModelCache(counting, tmp_path / "cache", 10**9, FakeClock())
    first = await cache.ensure(MODEL, entry)
    downloads = len(counting.gets)
    assert downloads == len(first.manifest.files) + 1
    assert (first.path / "model_index.json").is_file()
    assert MODEL not in str(first.path)  # the name never becomes a path
    await cache.ensure(MODEL, entry)
    restarted = ModelCache(counting, tmp_path / "cache", 10**9, FakeClock())
    again = await restarted.ensure(MODEL, entry)
    assert len(counting.gets) == downloads
    assert again.path == first.path


async def test_a_tampered_model_file_is_refused(
    object_store: S3ObjectStore,
    published_model: ModelRegistry,
    buckets: Buckets,
    s3: S3Client,
    tmp_path: Path,
) -> None:
    key = "wan-tiny/transformer/diffusion_pytorch_model.safetensors"
    s3.put_object(Bucket=buckets.models, Key=key, Body=b"not the weights")
    cache = ModelCache(object_store, tmp_path / "cache", 10**9, FakeClock())
    with pytest.raises(ModelCacheError, match="fails its SHA-256"):
        await cache.ensure(MODEL, published_model.resolve(MODEL))
    assert list((tmp_path / "cache").iterdir()) == []  # no half-downloaded model left


async def test_a_damaged_cached_file_is_evicted_and_reported(
    object_store: S3ObjectStore, published_model: ModelRegistry, tmp_path: Path
) -> None:
    cache = ModelCache(object_store, tmp_path / "cache", 10**9, FakeClock())
    model = await cache.ensure(MODEL, published_model.resolve(MODEL))
    (model.path / "vae" / "diffusion_pytorch_model.safetensors").write_bytes(b"x")
    with pytest.raises(ModelCacheError, match="damaged"):
        await cache.ensure(MODEL, published_model.resolve(MODEL))
    # The next call downloads it again.
    healed = await cache.ensure(MODEL, published_model.resolve(MODEL))
    assert (healed.path / "vae" / "diffusion_pytorch_model.safetensors").stat().st_size > 1


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


async def test_least_recently_used_models_are_evicted_past_the_budget(
    object_store: S3ObjectStore, tiny_model_dir: Path, buckets: Buckets, tmp_path: Path
) -> None:
    clock = FakeClock()
    entries = {}
    for name in ("wan/a", "wan/b", "wan/c"):
        uri = f"s3://{buckets.models}/{name}/"
        await publish_model(object_store, tiny_model_dir, uri, name, REVISION)
        entries[name] = ModelEntry(uri=uri, revision=REVISION)
    model_bytes = folder_bytes(tiny_model_dir)
    cache = ModelCache(object_store, tmp_path / "cache", int(model_bytes * 2.5), clock)

    a = await cache.ensure("wan/a", entries["wan/a"])
    clock.advance(10)
    b = await cache.ensure("wan/b", entries["wan/b"])
    clock.advance(10)
    await cache.ensure("wan/a", entries["wan/a"])  # a is now more recent than b
    clock.advance(10)
    c = await cache.ensure("wan/c", entries["wan/c"])
    cached = set(cache.entries())
    assert cached == {a.path.parent, c.path.parent}
    assert b.path.parent not in cached


def upload_manifest(s3: S3Client, buckets: Buckets, name: str, prefix: str, file: str) -> None:
    """A model manifest put in S3 by other means than publish-model, naming one file."""
    manifest = {
        "name": name,
        "revision": REVISION,
        "files": {file: {"sha256": "0" * 64, "size": 1}},
    }
    key = f"{prefix}/{MODEL_MANIFEST}"
    s3.put_object(Bucket=buckets.models, Key=key, Body=json.dumps(manifest))


async def test_unknown_models_and_unsafe_manifests_are_refused(
    object_store: S3ObjectStore, buckets: Buckets, s3: S3Client, tmp_path: Path
) -> None:
    registry = ModelRegistry(models={})
    with pytest.raises(UnknownModel):
        registry.resolve("wan/nope")
    upload_manifest(s3, buckets, "wan/evil", "evil", "../../etc/cron.d/evil")
    cache = ModelCache(object_store, tmp_path / "cache", 10**9, FakeClock())
    entry = ModelEntry(uri=f"s3://{buckets.models}/evil/", revision=REVISION)
    with pytest.raises(ModelCacheError, match="unsafe path"):
        await cache.ensure("wan/evil", entry)
    wrong = ModelEntry(uri=f"s3://{buckets.models}/evil/", revision="r2")
    with pytest.raises(ModelCacheError, match="registry says"):
        await cache.ensure("wan/evil", wrong)


async def test_a_model_added_to_the_registry_resolves_on_a_worker_already_up(
    object_store: S3ObjectStore, buckets: Buckets, s3: S3Client, tmp_path: Path
) -> None:
    """Before, a worker read its registry once at start: a model added later failed there
    (and counted against the machine) until the worker restarted."""
    uri = f"s3://{buckets.models}/registry.json"
    local = tmp_path / "models.json"
    local.write_text('{"models": {}}')  # what the instance fetched at boot
    live = LiveRegistry(local, object_store, uri)
    entry = {"uri": f"s3://{buckets.models}/new/", "revision": REVISION}
    s3.put_object(
        Bucket=buckets.models, Key="registry.json", Body=json.dumps({"models": {"acme/new": entry}})
    )
    assert (await live.lookup("acme/new")).revision == REVISION
    assert "acme/new" in local.read_text()  # the file, replaced whole, for the next start
    with pytest.raises(UnknownModel):  # still the job's fault for a name nobody published
        await live.lookup("acme/never")


async def test_pickled_weights_are_refused_at_publish_and_at_download(
    object_store: S3ObjectStore, buckets: Buckets, s3: S3Client, tmp_path: Path
) -> None:
    """`from_pretrained` would unpickle a .bin: such a model is never published or cached."""
    folder = tmp_path / "pickled"
    (folder / "transformer").mkdir(parents=True)
    (folder / "model_index.json").write_text("{}")
    (folder / "transformer" / "diffusion_pytorch_model.bin").write_bytes(b"\x80\x04pickle")
    uri = f"s3://{buckets.models}/pickled/"
    with pytest.raises(ModelCacheError, match="pickled weights"):
        await publish_model(object_store, folder, uri, "wan/pickled", REVISION)
    (folder / "transformer" / "diffusion_pytorch_model.bin").unlink()
    with pytest.raises(ModelCacheError, match=r"no \.safetensors weights"):
        await publish_model(object_store, folder, uri, "wan/pickled", REVISION)

    # A manifest uploaded by other means is refused before anything is downloaded.
    upload_manifest(s3, buckets, "wan/pickled", "pickled", "unet/weights.pt")
    cache = ModelCache(object_store, tmp_path / "cache", 10**9, FakeClock())
    with pytest.raises(ModelCacheError, match="pickled weights"):
        await cache.ensure("wan/pickled", ModelEntry(uri=uri, revision=REVISION))
    assert not any((tmp_path / "cache").iterdir())
