"""The S3 port the agent needs, and its aioboto3 adapter (multipart for large blobs)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import aioboto3
import boto3
from aiobotocore.config import AioConfig
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

from kernel.aws_errors import UNREACHABLE, AwsFault, classify, error_code
from worker_ami.agent.errors import ObjectNotFound, ObjectStoreError, OutputRefused
from worker_ami.agent.settings import WorkerSettings

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client as SyncS3Client
    from types_aiobotocore_s3 import S3Client
    from types_aiobotocore_s3.type_defs import CompletedPartTypeDef

MULTIPART_THRESHOLD = 16 * 1024 * 1024
MULTIPART_CHUNK = 8 * 1024 * 1024  # S3 wants parts of at least 5 MiB, except the last


class ObjectStore(Protocol):
    async def put(self, bucket: str, key: str, data: bytes) -> None: ...

    async def put_if_absent(self, bucket: str, key: str, data: bytes, content_type: str) -> bool:
        """Write only if nothing is at `key` (If-None-Match: *); False if something was.
        OutputRefused (a job fault) where the bucket is missing or refuses the write."""
        ...

    async def get(self, bucket: str, key: str) -> bytes: ...

    async def download(self, bucket: str, key: str, path: Path) -> None:
        """The object into the file at `path`, streamed (never whole in memory)."""
        ...

    async def list_keys(self, bucket: str, prefix: str) -> list[str]: ...

    async def delete(self, bucket: str, keys: Sequence[str]) -> None: ...


@contextmanager
def _translated(operation: str, bucket: str, key: str = "") -> Iterator[None]:
    try:
        yield
    except ClientError as error:
        code = error_code(error)
        if classify(code) is AwsFault.NOT_FOUND:
            raise ObjectNotFound(f"s3://{bucket}/{key} not found") from None
        raise ObjectStoreError(f"{operation} s3://{bucket}/{key}: {code}") from None
    except UNREACHABLE as error:
        raise ObjectStoreError(f"{operation} s3://{bucket}/{key}: {error}") from None


class S3ObjectStore:
    """`download` goes through boto3's transfer manager (s3transfer): a large object comes in
    parallel ranged GETs of `transfer.multipart_chunksize`, written to disk as they arrive, with
    its own retries of broken streams. It runs a synchronous boto3 client in a thread, made on
    first use for the same endpoint and region as `client` (credentials from the same chain)."""

    def __init__(self, client: S3Client, transfer: TransferConfig | None = None) -> None:
        self._client = client
        self._transfer = transfer or TransferConfig(
            multipart_threshold=MULTIPART_THRESHOLD,
            multipart_chunksize=MULTIPART_CHUNK,
            max_concurrency=8,
        )
        self._downloads: SyncS3Client | None = None

    async def put(self, bucket: str, key: str, data: bytes) -> None:
        with _translated("PutObject", bucket, key):
            if len(data) <= MULTIPART_THRESHOLD:
                await self._client.put_object(Bucket=bucket, Key=key, Body=data)
                return
            await self._put_multipart(bucket, key, data)

    async def _put_multipart(self, bucket: str, key: str, data: bytes) -> None:
        upload = await self._client.create_multipart_upload(Bucket=bucket, Key=key)
        upload_id = upload["UploadId"]
        try:
            parts: list[CompletedPartTypeDef] = []
            for number, start in enumerate(range(0, len(data), MULTIPART_CHUNK), start=1):
                part = await self._client.upload_part(
                    Bucket=bucket,
                    Key=key,
                    UploadId=upload_id,
                    PartNumber=number,
                    Body=data[start : start + MULTIPART_CHUNK],
                )
                parts.append({"ETag": part["ETag"], "PartNumber": number})
            await self._client.complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
            )
        except BaseException:
            await self._client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
            raise

    async def put_if_absent(self, bucket: str, key: str, data: bytes, content_type: str) -> bool:
        try:
            await self._client.put_object(
                Bucket=bucket, Key=key, Body=data, ContentType=content_type, IfNoneMatch="*"
            )
        except ClientError as error:
            code = error_code(error)
            fault = classify(code)
            if fault is AwsFault.PRECONDITION_FAILED:
                return False
            if fault in (AwsFault.ACCESS_DENIED, AwsFault.NOT_FOUND):
                raise OutputRefused(f"PutObject s3://{bucket}/{key}: {code}") from None
            raise ObjectStoreError(f"PutObject s3://{bucket}/{key}: {code}") from None
        except UNREACHABLE as error:
            raise ObjectStoreError(f"PutObject s3://{bucket}/{key}: {error}") from None
        return True

    async def get(self, bucket: str, key: str) -> bytes:
        with _translated("GetObject", bucket, key):
            response = await self._client.get_object(Bucket=bucket, Key=key)
            async with response["Body"] as body:
                return await body.read()

    async def download(self, bucket: str, key: str, path: Path) -> None:
        if self._downloads is None:
            meta = self._client.meta
            # The transfer threads' requests say which process made them (CloudTrail shows it).
            config = Config(
                retries={"mode": "standard", "max_attempts": 5},
                user_agent_extra="framefleet/worker",
            )
            self._downloads = boto3.client(
                "s3", endpoint_url=meta.endpoint_url, region_name=meta.region_name, config=config
            )
        downloads = self._downloads
        with _translated("GetObject", bucket, key):
            await asyncio.to_thread(
                downloads.download_file, bucket, key, str(path), Config=self._transfer
            )

    async def list_keys(self, bucket: str, prefix: str) -> list[str]:
        keys: list[str] = []
        with _translated("ListObjectsV2", bucket, prefix):
            paginator = self._client.get_paginator("list_objects_v2")
            async for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
                keys.extend(item["Key"] for item in page.get("Contents", []) if "Key" in item)
        return keys

    async def delete(self, bucket: str, keys: Sequence[str]) -> None:
        for start in range(0, len(keys), 1000):
            chunk = keys[start : start + 1000]
            with _translated("DeleteObjects", bucket):
                await self._client.delete_objects(
                    Bucket=bucket, Delete={"Objects": [{"Key": key} for key in chunk]}
                )


@asynccontextmanager
async def s3_client(settings: WorkerSettings) -> AsyncIterator[S3Client]:
    session = aioboto3.Session(region_name=settings.region)
    config = AioConfig(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=32)
    async with session.client("s3", endpoint_url=settings.endpoint_url, config=config) as client:
        yield client
