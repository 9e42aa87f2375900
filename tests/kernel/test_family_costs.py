"""The fleet knows the model families (issue 50): LTX-Video's VAE makes one token of 32x32
pixels and 8 frames (a sixteenth of Wan's count at the same video), so its steps are far
cheaper; Wan 2.2 A14B's step costs a 14B's (one expert runs) while its memory holds both
experts; a fine-tune under a name of its own is sized by its registry family."""

from __future__ import annotations

from kernel.model_family import ModelFamily
from kernel.model_memory import model_need_gib
from kernel.precision import Dtype
from kernel.step_time import LTX_2B, WAN_1_3B, WAN_14B, WAN_A14B, architecture_of, step_seconds
from kernel.step_time import tokens as video_tokens

GIB = 2**30


def test_each_family_counts_its_own_tokens() -> None:
    assert video_tokens(768, 512, 121, LTX_2B) == 16 * 16 * 24
    assert video_tokens(832, 480, 81, WAN_14B) == 21 * 30 * 52


def test_names_place_the_families() -> None:
    assert architecture_of("lightricks/ltx-video") is LTX_2B
    assert architecture_of("acme/ltx-promo-ft") is LTX_2B
    assert architecture_of("wan/wan2.2-i2v-a14b") is WAN_A14B
    assert architecture_of("wan/wan2.1-t2v-1.3b") is WAN_1_3B


def test_ltx_steps_are_cheap_and_wan22_steps_cost_one_expert() -> None:
    ltx = step_seconds(LTX_2B, 832, 480, 81, "h100")
    wan_small = step_seconds(WAN_1_3B, 832, 480, 81, "h100")
    assert ltx < wan_small / 4
    assert step_seconds(WAN_A14B, 832, 480, 81, "h100") == step_seconds(
        WAN_14B, 832, 480, 81, "h100"
    )


def test_two_experts_need_the_memory_of_both() -> None:
    one = model_need_gib("wan/wan2.1-t2v-14b", 832, 480, Dtype.BF16)
    two = model_need_gib("wan/wan2.2-t2v-a14b", 832, 480, Dtype.BF16)
    assert one is not None
    assert two is not None
    assert round(two - one, 1) == round(14.3e9 * 2 / GIB, 1)


def test_a_fine_tune_is_sized_by_its_registry_family() -> None:
    weights = int((1.9e9 + 4.7e9) * 2)  # an LTX-Video fine-tune with its T5 encoder, bf16
    as_wan = model_need_gib("acme/promo-ft", 832, 480, Dtype.BF16, weights=weights)
    as_ltx = model_need_gib(
        "acme/promo-ft", 832, 480, Dtype.BF16, weights=weights, family=ModelFamily.LTX_VIDEO
    )
    assert as_wan is not None
    assert as_ltx is not None
    assert as_ltx < as_wan  # a sixteenth of the tokens: far fewer activations
    assert as_ltx >= weights / GIB  # never below the weights
