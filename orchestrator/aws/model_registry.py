"""The model registry and the published models' manifests, read from S3 (aioboto3), or the
registry from a local file (the demo's). Thin: boto stays here, its errors leave typed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError

from kernel.aws_errors import translated
from kernel.errors import ConfigurationError, FrameFleetError, NotFound
from kernel.model_registry import MODEL_MANIFEST
from orchestrator.intake.model_door import ObjectProbe

if TYPE_CHECKING:
    from types_aiobotocore_s3.client import S3Client


def split_s3(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    if not uri.startswith("s3://") or not bucket:
        raise ConfigurationError(f"not an s3:// location: {uri!r}")
    return bucket, key


class S3RegistryReader:
    def __init__(self, s3: S3Client, location: str) -> None:
        """`location`: the registry's s3://bucket/key, or a local file's path."""
        self._s3, self._location = s3, location

    async def registry(self) -> bytes:
        if not self._location.startswith("s3://"):
            path = Path(self._location)
            try:
                return await asyncio.to_thread(path.read_bytes)
            except OSError as error:
                raise ConfigurationError(f"model registry {path}: {error}") from None
        return await self._get(*split_s3(self._location))

    async def manifest(self, uri: str) -> bytes | None:
        bucket, prefix = split_s3(uri)
        try:
            return await self._get(bucket, prefix.rstrip("/") + "/" + MODEL_MANIFEST)
        except NotFound:
            return None

    async def probe(self, uri: str, first: int) -> ObjectProbe | str:
        bucket, key = split_s3(uri)
        try:
            with translated("GetObject"):
                found = await self._s3.get_object(
                    Bucket=bucket, Key=key, Range=f"bytes=0-{first - 1}"
                )
                async with found["Body"] as body:
                    head: bytes = await body.read()
        except NotFound:
            return "no such object"
        except (FrameFleetError, BotoCoreError) as error:  # a refusal, never a 500
            return f"not readable: {error}"
        # A ranged read's Content-Range says the whole size ("bytes 0-15/48213").
        total = str(found.get("ContentRange", "")).rpartition("/")[2]
        return ObjectProbe(int(total) if total.isdigit() else len(head), head)

    async def _get(self, bucket: str, key: str) -> bytes:
        with translated("GetObject"):
            found = await self._s3.get_object(Bucket=bucket, Key=key)
            async with found["Body"] as body:
                data: bytes = await body.read()
        return data
