"""The S3 adapter against moto server: multipart for large blobs, conditional puts, typed errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.renders import Buckets
from worker_ami.agent.errors import ObjectNotFound
from worker_ami.agent.object_store import MULTIPART_THRESHOLD, S3ObjectStore


async def test_a_large_blob_goes_up_in_parts_and_comes_back_whole(
    object_store: S3ObjectStore, buckets: Buckets
) -> None:
    blob = os.urandom(MULTIPART_THRESHOLD + 3 * 1024 * 1024)
    await object_store.put(buckets.checkpoints, "big/latents.safetensors", blob)
    assert await object_store.get(buckets.checkpoints, "big/latents.safetensors") == blob


async def test_conditional_put_never_overwrites(
    object_store: S3ObjectStore, buckets: Buckets
) -> None:
    assert await object_store.put_if_absent(buckets.outputs, "v/a.mp4", b"first", "video/mp4")
    assert not await object_store.put_if_absent(buckets.outputs, "v/a.mp4", b"second", "video/mp4")
    assert await object_store.get(buckets.outputs, "v/a.mp4") == b"first"


async def test_listing_deleting_and_missing_keys(
    object_store: S3ObjectStore, buckets: Buckets
) -> None:
    for name in ("a", "b", "c"):
        await object_store.put(buckets.checkpoints, f"job/{name}", name.encode())
    assert await object_store.list_keys(buckets.checkpoints, "job/") == ["job/a", "job/b", "job/c"]
    await object_store.delete(buckets.checkpoints, ["job/a", "job/b"])
    assert await object_store.list_keys(buckets.checkpoints, "job/") == ["job/c"]
    with pytest.raises(ObjectNotFound):
        await object_store.get(buckets.checkpoints, "job/a")


async def test_a_large_file_comes_down_in_ranged_parts_straight_to_disk(
    object_store: S3ObjectStore, buckets: Buckets, tmp_path: Path
) -> None:
    blob = os.urandom(MULTIPART_THRESHOLD + 3 * 1024 * 1024)
    await object_store.put(buckets.models, "m/weights.safetensors", blob)
    ranges: list[str] = []
    await object_store.download(buckets.models, "m/weights.safetensors", tmp_path / "w")
    assert (tmp_path / "w").read_bytes() == blob
    # The transfer manager's own client: count the GETs of a second download, and their ranges.
    downloads = object_store._downloads
    assert downloads is not None
    downloads.meta.events.register(
        "before-call.s3.GetObject",
        lambda params, **_: ranges.append(params["headers"].get("Range", "")),
    )
    await object_store.download(buckets.models, "m/weights.safetensors", tmp_path / "again")
    assert (tmp_path / "again").read_bytes() == blob
    assert len(ranges) == 3  # 19 MiB in parts of 8 MiB
    assert all(r.startswith("bytes=") for r in ranges)
    with pytest.raises(ObjectNotFound):
        await object_store.download(buckets.models, "m/none", tmp_path / "none")
