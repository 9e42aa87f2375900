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


def test_the_offline_catalogue_holds_todays_gpu_types() -> None:
    """Before, 17 hard-coded types: no H200 (p5e, p5en), no A100 80 GB (p4de), no larger g6e,
    and naming one of them in `candidate_types` was a configuration error."""
    for name in ("p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p4d.24xlarge", "p4de.24xlarge"):
        assert CATALOG[name].gpus == 8
    assert CATALOG["p5e.48xlarge"].family is GpuFamily.H200
    assert CATALOG["p4de.24xlarge"].vram_gib == 80
    for family in ("g4dn", "g5", "g6", "gr6", "g6e"):
        assert any(name.startswith(family + ".") for name in CATALOG)
    assert {"g6e.4xlarge", "g6e.48xlarge"} <= set(CATALOG)
    assert all(kind.vcpus > 0 for kind in CATALOG.values())  # what the quotas count
