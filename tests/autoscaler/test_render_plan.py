"""Where a render runs cheapest, and when it splits into stages (autoscaler/render_plan.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.render_plan import SPLIT_MARGIN, GpuOffer, plan_render
from kernel.instance_types import L40S_GIB
from kernel.stage_cost import Video
from kernel.step_time import WAN_1_3B, WAN_14B
from simulator.gpu_workload import (
    PREVIEW,
    RENDER_480P,
    RENDER_480P_14B,
    RENDER_720P_14B,
    list_price_offers,
)

OFFERS = list_price_offers()


def test_a_14b_480p_render_needs_an_80_gib_gpu_whole_and_fits_an_l40s_as_a_stage() -> None:
    # Whole it needs 46.8 GiB, past the 44.99 an L40S reports; its denoising stage alone
    # (no text encoder) needs 36.1.
    whole = plan_render(RENDER_480P_14B, OFFERS, may_span=False, may_split=False)
    assert whole is not None
    assert [p.family for p in whole.stages] == ["h100"]
    staged = plan_render(RENDER_480P_14B, OFFERS, may_span=False, may_split=True)
    assert staged is not None
    assert staged.split
    assert [p.stage for p in staged.stages] == ["encode", "denoise", "decode"]
    assert staged.stages[1].family == "l40s"
    assert staged.stages[1].need_gib <= L40S_GIB
    assert staged.cost < whole.cost


def test_a_14b_720p_denoising_stage_does_not_fit_an_l40s_as_it_reports_its_memory() -> None:
    staged = plan_render(RENDER_720P_14B, OFFERS, may_span=False, may_split=True)
    assert staged is not None
    assert all(p.family != "l40s" for p in staged.stages if p.stage in {"render", "denoise"})


def test_a_small_render_stays_whole_when_a_split_saves_too_little() -> None:
    for video in (RENDER_480P, PREVIEW):
        plan = plan_render(video, OFFERS, may_span=True, may_split=True)
        assert plan is not None
        assert not plan.split, plan.why


def test_a_tight_deadline_spreads_the_render_over_gpus_rather_than_pay_a_whole_p5() -> None:
    one_hour = 3600.0
    # The L40S stage alone is too slow for the hour: without spanning only an H100 meets
    # it, and the one type with H100s has eight of them.
    alone = plan_render(RENDER_720P_14B, OFFERS, False, True, window_seconds=one_hour)
    assert alone is not None
    assert alone.seconds <= one_hour
    assert {p.family for p in alone.stages if p.stage != "encode"} >= {"h100"}
    spread = plan_render(RENDER_720P_14B, OFFERS, True, True, window_seconds=one_hour)
    assert spread is not None
    assert spread.seconds <= one_hour
    assert max(p.gpus for p in spread.stages) > 1
    assert spread.cost < alone.cost


def test_a_render_no_offer_holds_has_no_plan() -> None:
    small = [o for o in OFFERS if o.vram_gib <= 16]
    assert plan_render(RENDER_720P_14B, small, may_span=False, may_split=False) is None


@settings(max_examples=60, deadline=None)
@given(
    large=st.booleans(),
    width=st.sampled_from([448, 832, 1280]),
    frames=st.sampled_from([17, 33, 81]),
    window=st.one_of(st.none(), st.floats(600, 12 * 3600)),
    offers=st.lists(st.sampled_from(OFFERS), min_size=1, max_size=8, unique=True),
)
def test_a_split_is_chosen_only_where_it_saves_the_margin_or_alone_meets_the_deadline(
    large: bool, width: int, frames: int, window: float | None, offers: list[GpuOffer]
) -> None:
    video = Video(WAN_14B if large else WAN_1_3B, width, width * 9 // 16, frames, 50)
    plan = plan_render(video, offers, True, True, window)
    if plan is None or not plan.split:
        return
    whole = plan_render(video, offers, True, False, window)
    if whole is None:
        return
    meets = window is None or whole.seconds <= window
    assert plan.cost < whole.cost * (1 - SPLIT_MARGIN) or not meets, plan.why
