"""The GPU fleet simulation of issue 35: every configuration renders every video, none pays
less than the lower bound, and each feature earns its place on the workload it is for."""

from __future__ import annotations

import itertools

import pytest

from simulator.gpu_fleet import Features, GpuFleet, lower_bound
from simulator.gpu_workload import Mix, VideoJob, list_price_offers, mixed_workload

OFFERS = list_price_offers()
ALL = [Features(*flags) for flags in itertools.product((False, True), repeat=3)]


@pytest.fixture(scope="module")
def workload() -> list[VideoJob]:
    return mixed_workload(120, 6.0, seed=4)


def test_every_configuration_renders_every_video_at_no_less_than_the_bound(
    workload: list[VideoJob],
) -> None:
    bound = lower_bound(workload, OFFERS)
    costs = {}
    for features in ALL:
        outcome = GpuFleet(OFFERS, features).run(workload)
        assert outcome.videos == len(workload), features.name
        assert outcome.cost >= bound, features.name
        costs[features.name] = outcome.cost
    assert costs["sharing + spanning + stages"] < costs["one job per GPU"]


def test_the_simulation_is_deterministic(workload: list[VideoJob]) -> None:
    features = Features(True, True, True)
    assert GpuFleet(OFFERS, features).run(workload) == GpuFleet(OFFERS, features).run(workload)


def test_previews_sharing_gpus_need_fewer_gpu_hours() -> None:
    previews = mixed_workload(400, 2.0, seed=5, mix=Mix(0.0, 1.0, 0.0))
    alone = GpuFleet(OFFERS, Features(stages=True)).run(previews)
    shared = GpuFleet(OFFERS, Features(sharing=True, stages=True)).run(previews)
    assert shared.videos == alone.videos == len(previews)
    # Two previews to an L40S (each needs 15.4 of its 44.99 GiB): fewer GPU hours billed.
    assert shared.gpu_hours < alone.gpu_hours
    assert shared.cost < alone.cost


def test_sparse_urgent_14b_renders_span_cheaper_gpus_than_a_whole_p5_each() -> None:
    """Due within 40 minutes, a 14B 720p render fits the hour only on an H100 alone, and the one
    type with H100s has eight; spread over four L40S it meets the deadline at a fraction."""
    urgent = mixed_workload(6, 12.0, seed=6, mix=Mix(0.0, 0.0, 1.0, (0.6, 0.8)))
    one = GpuFleet(OFFERS, Features()).run(urgent)
    spread = GpuFleet(OFFERS, Features(spanning=True)).run(urgent)
    assert spread.misses == one.misses == 0
    assert spread.spanned_jobs == len(urgent)
    assert spread.cost < one.cost * 0.6
