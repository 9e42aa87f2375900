"""One word for one thing: the market and GPU families, as every part spells them."""

from __future__ import annotations

import pytest

from kernel.instance_types import CATALOG
from kernel.market import GpuFamily, Market, family_of_gpu
from kernel.worker_protocol import Hello


@pytest.mark.parametrize(
    ("nvml_name", "family"),
    [
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA L4", "l4"),
        ("Tesla T4", "t4"),
        ("NVIDIA A10G", "a10g"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H200", "h200"),
        ("Tesla V100-SXM2-16GB", "v100"),
        ("NVIDIA RTX 6000 Ada Generation", "nvidiartx6000ada"),
    ],
)
def test_a_gpu_name_maps_to_its_family(nvml_name: str, family: str) -> None:
    assert family_of_gpu(nvml_name) == family


def test_the_catalog_sells_only_families_a_job_can_ask_for() -> None:
    assert {kind.family for kind in CATALOG.values()} <= set(GpuFamily)


def test_a_hello_names_its_market_with_the_shared_word() -> None:
    assert Hello.model_fields["market"].annotation is Market
