"""The stage-cost model: what spreading a render over GPUs and splitting it into stages costs."""

from __future__ import annotations

import pytest

from kernel.model_memory import RUNTIME_GIB
from kernel.precision import Dtype
from kernel.stage_cost import (
    Video,
    decode_seconds,
    denoise_need_gib,
    encode_need_gib,
    exchange_seconds,
    span_step_seconds,
)
from kernel.step_time import WAN_14B

VIDEO_720P = Video(WAN_14B, 1280, 720, 81, 50)


def test_one_gpu_exchanges_nothing_and_more_gpus_each_hold_less() -> None:
    assert exchange_seconds(VIDEO_720P, 1, "g6e.12xlarge") == 0.0
    needs = [denoise_need_gib(VIDEO_720P, Dtype.BF16, gpus) for gpus in (1, 2, 4, 8)]
    assert needs == sorted(needs, reverse=True)
    # The transformer is whole on every GPU: spreading never takes a GPU below its weights.
    assert needs[-1] > WAN_14B.parameters * 2 / 2**30


def test_nvlink_exchanges_faster_than_pcie_and_a_span_is_quicker_than_one_gpu() -> None:
    assert exchange_seconds(VIDEO_720P, 4, "p5.48xlarge") < exchange_seconds(
        VIDEO_720P, 4, "g6e.12xlarge"
    )
    alone = 90.0
    spread = [span_step_seconds(VIDEO_720P, alone, gpus, "g6e.12xlarge") for gpus in (1, 2, 4)]
    assert spread[0] == alone
    assert spread == sorted(spread, reverse=True)
    # ...but never by the full factor: the exchange is paid on top of each GPU's share.
    assert spread[2] > alone / 4


def test_encoding_as_a_stage_frees_the_text_encoder_from_the_denoising_gpu() -> None:
    with_encoder = denoise_need_gib(VIDEO_720P, Dtype.BF16)
    without = denoise_need_gib(VIDEO_720P, Dtype.BF16, with_text_encoder=False)
    assert with_encoder - without == pytest.approx(encode_need_gib(Dtype.BF16) - RUNTIME_GIB)
    assert decode_seconds(VIDEO_720P, "h100") < decode_seconds(VIDEO_720P, "l4")
