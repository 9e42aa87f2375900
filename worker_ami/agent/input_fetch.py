"""A job's input objects on local disk before its render opens: the image of an image-to-video
job and its LoRA adapters' files (named by S3 URI, or by the registry's name). The render
process reads them there (it never talks to S3); the folder is the job's alone and removed
when the runner releases the job.

A missing object is the job's fault (no machine would find it); S3 failing otherwise is the
worker's (the job is retried elsewhere). The door checked the objects at submit; they may have
gone since.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import tempfile
from pathlib import Path
from typing import Protocol

from kernel.job_spec import JobSpec
from kernel.model_registry import AdapterEntry
from worker_ami.agent.errors import JobFault, ObjectNotFound
from worker_ami.agent.job_inputs import NO_INPUTS, AdapterFile, JobInputs
from worker_ami.agent.object_store import ObjectStore
from worker_ami.agent.s3_uri import split_s3_uri


class AdapterLookup(Protocol):
    async def adapter(self, name: str) -> AdapterEntry:
        """The registry's adapter; JobFault when it has none of that name."""
        ...


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class InputFetcher:
    def __init__(self, objects: ObjectStore, registry: AdapterLookup) -> None:
        self._objects, self._registry = objects, registry
        self._folder: Path | None = None

    async def fetch(self, spec: JobSpec) -> JobInputs:
        self.clear()
        if spec.image is None and not spec.adapters:
            return NO_INPUTS
        self._folder = Path(tempfile.mkdtemp(prefix=f"ff-inputs-{spec.job_id[:40]}-"))
        image = None
        if spec.image is not None:
            image = await self._download(spec.image, "image", "input image")
        adapters = []
        for index, ref in enumerate(spec.adapters):
            uri = ref.uri
            if uri is None:
                assert ref.name is not None  # the spec names one of the two
                entry = await self._registry.adapter(ref.name)
                if entry.base != spec.model:
                    raise JobFault(f"adapter {ref.name!r} was made for {entry.base}")
                uri = entry.uri
            path = await self._download(uri, f"adapter-{index}.safetensors", "adapter")
            digest = await asyncio.to_thread(_sha256, path)
            adapters.append(AdapterFile(path, ref.weight, digest))
        return JobInputs(image=image, adapters=tuple(adapters))

    async def _download(self, uri: str, name: str, what: str) -> Path:
        assert self._folder is not None
        path = self._folder / name
        try:
            await self._objects.download(*split_s3_uri(uri), path)
        except ObjectNotFound:
            gone = f"{what} {uri} is not there (deleted since the job was submitted?)"
            raise JobFault(gone) from None
        return path

    def clear(self) -> None:
        """Remove the last job's inputs."""
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
