"""Models are known at the door: an unknown model, or a need no GPU FrameFleet buys can meet,
is refused before it costs a boot; a known model gives the job its own GPU need (measured, or
estimated from its published weights, never below them); a new registry entry counts without a
restart, and a registry that cannot be read keeps the last one."""

from __future__ import annotations

import json

from kernel.clock import FakeClock
from kernel.errors import NotFound
from kernel.job_spec import JobSpec, parse_job
from orchestrator.intake.model_door import DoorReason, DoorRefusal, ModelDoor, ObjectProbe
from tests.support.jobs import job_dict

GIB = 2**30
# A 14B transformer and its 5.7B text encoder in bf16, as published: 40 GB of safetensors.
FOURTEEN_B = int((14.3e9 + 5.7e9) * 2)


class Registry:
    """A programmable registry in S3: its document and the published models' manifests."""

    def __init__(self) -> None:
        self.models: dict[str, dict[str, object]] = {}
        self.weights: dict[str, int] = {}  # uri -> bytes of .safetensors
        self.down = False

    def publish(self, name: str, weights: int | None = None, **entry: object) -> None:
        uri = f"s3://models/{name}/"
        self.models[name] = {"uri": uri, "revision": "r1", **entry}
        if weights is not None:
            self.weights[uri] = weights

    async def registry(self) -> bytes:
        if self.down:
            raise NotFound("GetObject: NoSuchKey: registry.json")
        return json.dumps({"models": self.models}).encode()

    async def probe(self, uri: str, first: int) -> ObjectProbe | str:
        return "no such object"  # the objects' checks read moto's S3 (test_input_door.py)

    async def manifest(self, uri: str) -> bytes | None:
        if uri not in self.weights:
            return None
        files = {"transformer/model.safetensors": {"sha256": "0" * 64, "size": self.weights[uri]}}
        return json.dumps({"name": "x", "revision": "r1", "files": files}).encode()


def job(model: str, width: int = 832, height: int = 480, **gpu: object) -> JobSpec:
    return parse_job(
        job_dict("j1", model=model, width=width, height=height, gpu=gpu or {}), now=None
    )


async def door_with(registry: Registry) -> ModelDoor:
    door = ModelDoor(registry, FakeClock())
    await door.refresh()
    return door


async def test_an_unknown_model_is_refused_with_the_names_that_are_known() -> None:
    registry = Registry()
    registry.publish("wan/wan2.1-t2v-14b")
    refused = (await door_with(registry)).admit(job("wan/wan9-typo"))
    assert isinstance(refused, DoorRefusal)
    assert refused.reason is DoorReason.UNKNOWN_MODEL
    assert "'wan/wan9-typo' is not in the model registry" in refused.error
    assert "wan/wan2.1-t2v-14b" in refused.error


async def test_a_fine_tune_under_a_name_of_its_own_needs_what_its_weights_need() -> None:
    # Before, only wan/wan2.1-t2v-14b had a figure: a 14B fine-tune under another name got the
    # 16 GiB default, below its own 37 GiB of weights, and was bought GPUs it cannot load on.
    registry = Registry()
    registry.publish("acme/trailer-ft", weights=FOURTEEN_B)
    admitted = (await door_with(registry)).admit(job("acme/trailer-ft"))
    assert isinstance(admitted, JobSpec)
    assert admitted.gpu.min_vram_gib >= FOURTEEN_B / GIB  # never below the weights
    assert admitted.gpu.min_vram_gib == 46.8  # what the measured 14B needs at 480p


async def test_a_measured_figure_wins_and_a_producers_larger_one_stands() -> None:
    registry = Registry()
    registry.publish("acme/small", weights=3 * GIB, memory_gib={"bf16/480p": 20.5})
    door = await door_with(registry)
    measured = door.admit(job("acme/small"))
    assert isinstance(measured, JobSpec)
    assert measured.gpu.min_vram_gib == 20.5
    asked_more = door.admit(job("acme/small", min_vram_gib=40))
    assert isinstance(asked_more, JobSpec)
    assert asked_more.gpu.min_vram_gib == 40


async def test_a_need_no_gpu_on_offer_meets_is_refused_at_the_door() -> None:
    registry = Registry()
    registry.publish("acme/giant", weights=200 * GIB)
    refused = (await door_with(registry)).admit(job("acme/giant"))
    assert isinstance(refused, DoorRefusal)
    assert refused.reason is DoorReason.IMPOSSIBLE_NEED
    assert "the largest GPU FrameFleet buys has" in refused.error


async def test_a_new_entry_counts_at_the_next_read_and_a_failed_read_keeps_the_last() -> None:
    registry = Registry()
    registry.publish("wan/wan2.1-t2v-14b")
    door = await door_with(registry)
    assert isinstance(door.admit(job("acme/new")), DoorRefusal)
    registry.publish("acme/new")
    await door.refresh()
    assert isinstance(door.admit(job("acme/new")), JobSpec)
    registry.down = True
    await door.refresh()  # S3 blinked: the door stays as it was
    assert isinstance(door.admit(job("acme/new")), JobSpec)
    assert isinstance(door.admit(job("acme/other")), DoorRefusal)
