"""A job's inputs are checked at the door, before it costs a boot (issue 50): an image for a
text-to-video model or none for an image-to-video one, a shape the model's family cannot make,
an adapter the registry does not hold or holds for another model are refused from the registry
alone; an image that is missing, too large or not an image, and an adapter file that is
missing, are refused from what S3 (moto) says of the object. A good job passes."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import AsyncIterator

import aioboto3
import boto3
import pytest
from PIL import Image

from kernel.clock import FakeClock
from kernel.input_spec import MAX_IMAGE_BYTES
from kernel.job_spec import JobSpec, parse_job
from orchestrator.aws.model_registry import S3RegistryReader
from orchestrator.intake.model_door import DoorReason, DoorRefusal, ModelDoor
from tests.support.jobs import job_dict
from tests.support.local_services import REGION


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (32, 32), (200, 40, 40)).save(out, format="PNG")
    return out.getvalue()


@pytest.fixture
async def door(moto_endpoint: str) -> AsyncIterator[tuple[ModelDoor, str]]:
    bucket = f"inputs-{uuid.uuid4().hex[:10]}"
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=moto_endpoint)
    s3.create_bucket(Bucket=bucket)
    registry = {
        "models": {
            "wan/t2v": {"uri": f"s3://{bucket}/t2v/", "revision": "r1"},
            "wan/i2v": {"uri": f"s3://{bucket}/i2v/", "revision": "r1", "family": "wan2.2-i2v"},
            "ltx/video": {"uri": f"s3://{bucket}/ltx/", "revision": "r1", "family": "ltx-video"},
        },
        "adapters": {
            "acme/style": {"uri": f"s3://{bucket}/lora/style.safetensors", "base": "wan/t2v"},
            "acme/gone": {"uri": f"s3://{bucket}/lora/gone.safetensors", "base": "wan/t2v"},
        },
    }
    s3.put_object(Bucket=bucket, Key="registry.json", Body=json.dumps(registry).encode())
    s3.put_object(Bucket=bucket, Key="in/shot.png", Body=png())
    s3.put_object(Bucket=bucket, Key="in/notes.png", Body=b"not an image at all, just text")
    s3.put_object(Bucket=bucket, Key="in/huge.png", Body=png() + b"\0" * MAX_IMAGE_BYTES)
    s3.put_object(Bucket=bucket, Key="lora/style.safetensors", Body=b"\x08" + b"\0" * 64)
    async with aioboto3.Session(region_name=REGION).client(
        "s3", endpoint_url=moto_endpoint
    ) as client:
        made = ModelDoor(S3RegistryReader(client, f"s3://{bucket}/registry.json"), FakeClock())
        await made.refresh()
        yield made, bucket


def job(model: str, **fields: object) -> JobSpec:
    return parse_job(job_dict("in-1", model=model, **fields), now=None)


async def refusal(door: ModelDoor, spec: JobSpec) -> str | None:
    admitted = door.admit(spec)
    if isinstance(admitted, DoorRefusal):
        assert admitted.reason is DoorReason.BAD_INPUT
        return admitted.error
    found = await door.inputs_refusal(admitted)
    assert found is None or found.reason is DoorReason.BAD_INPUT
    return None if found is None else found.error


async def test_each_bad_input_is_refused_with_its_reason(door: tuple[ModelDoor, str]) -> None:
    gate, bucket = door
    image = f"s3://{bucket}/in/shot.png"
    cases = {
        "takes no input image": job("wan/t2v", image=image),
        "must name its input image": job("wan/i2v"),
        "multiples of 32": job("ltx/video", width=48, height=32, num_frames=9),
        "1 + a multiple of 8": job("ltx/video", width=64, height=32, num_frames=13),
        "no such object": job("wan/i2v", image=f"s3://{bucket}/in/missing.png"),
        "not a PNG, JPEG or WebP": job("wan/i2v", image=f"s3://{bucket}/in/notes.png"),
        f"more than {MAX_IMAGE_BYTES}": job("wan/i2v", image=f"s3://{bucket}/in/huge.png"),
        "'acme/nope' is not in the model registry": job(
            "wan/t2v", adapters=[{"name": "acme/nope"}]
        ),
        "was made for wan/t2v": job("wan/i2v", image=image, adapters=[{"name": "acme/style"}]),
        "lora/gone.safetensors: no such object": job("wan/t2v", adapters=[{"name": "acme/gone"}]),
        "x.safetensors: no such object": job(
            "wan/t2v", adapters=[{"uri": f"s3://{bucket}/lora/x.safetensors", "weight": 0.5}]
        ),
    }
    for expected, spec in cases.items():
        found = await refusal(gate, spec)
        assert found is not None, expected
        assert expected in found, (expected, found)


async def test_good_inputs_pass(door: tuple[ModelDoor, str]) -> None:
    gate, bucket = door
    image = f"s3://{bucket}/in/shot.png"
    assert await refusal(gate, job("wan/i2v", image=image)) is None
    assert await refusal(gate, job("wan/t2v", adapters=[{"name": "acme/style"}])) is None
    assert await refusal(gate, job("ltx/video", width=64, height=32, num_frames=17)) is None


def test_an_adapter_names_one_source_within_the_weights_range() -> None:
    from kernel.errors import JobValidationError

    for adapters, said in [
        ([{"weight": 1.0}], "exactly one of uri"),
        ([{"uri": "s3://bucket-a/l.bin"}], "nothing pickled"),
        ([{"name": "acme/style", "weight": 2.5}], "less than or equal to 2"),
        ([{"name": "a"}] * 5, "at most 4"),
    ]:
        with pytest.raises(JobValidationError) as raised:
            parse_job(job_dict("in-2", adapters=adapters), now=None)
        assert said in str(raised.value), raised.value
