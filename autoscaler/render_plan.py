"""Where a render runs cheapest: which GPU family and how many of its GPUs the denoising loop
takes, and whether encoding and decoding become stages of their own on cheaper GPUs. A pure
rule over the offers' prices and the stage-cost model (`kernel.stage_cost`).

The split pays in two ways, and costs in one. Time: the encoding and decoding seconds leave the
dear denoising GPU for a cheap one. Memory: without the text encoder's 11 GiB, the denoising
loop fits a smaller GPU, or fewer GPUs of a span. The cost: each extra stage writes and reads
its tensors through S3 and starts on a GPU that has its model loaded, and it waits its turn in
the queue. `STAGE_OVERHEAD_SECONDS` prices the first on the cheap GPU's clock; the queueing is
what `SPLIT_MARGIN` covers, so a render splits only when that saves a clear share of its cost.
The fleet simulator (`simulator/gpu_fleet.py`) measures whether that margin is right.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kernel.precision import Dtype
from kernel.stage_cost import (
    Video,
    decode_need_gib,
    decode_seconds,
    denoise_need_gib,
    encode_need_gib,
    encode_seconds,
    span_step_seconds,
)
from kernel.step_time import compute_dtype, step_seconds

STAGE_OVERHEAD_SECONDS = 20.0  # S3 round trip of the stage's tensors and its process start
SPLIT_MARGIN = 0.05  # a split must save this share of the render's cost
SPAN_SIZES = (2, 4, 8)


@dataclass(frozen=True)
class GpuOffer:
    """An instance type the fleet may buy, at its price now."""

    instance_type: str
    family: str
    gpus: int
    vram_gib: float
    price_per_hour: float

    @property
    def price_per_gpu_second(self) -> float:
        return self.price_per_hour / self.gpus / 3600


@dataclass(frozen=True)
class Placement:
    """One stage (or the whole render) on `gpus` GPUs of a family, priced per GPU."""

    stage: str  # "render" (all three on one place), "encode", "denoise" or "decode"
    family: str
    gpus: int
    seconds: float  # wall seconds on those GPUs
    need_gib: float  # per GPU
    cost: float  # what its seconds cost (`_price`)

    @property
    def gpu_seconds(self) -> float:
        return self.seconds * self.gpus


@dataclass(frozen=True)
class RenderPlan:
    stages: tuple[Placement, ...]  # one "render", or encode, denoise, decode in order
    why: str

    @property
    def split(self) -> bool:
        return len(self.stages) > 1

    @property
    def cost(self) -> float:
        return sum(p.cost for p in self.stages)

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.stages)


def _largest(offers: Sequence[GpuOffer], family: str) -> int:
    return max((o.gpus for o in offers if o.family == family), default=0)


def denoise_placements(
    video: Video, offers: Sequence[GpuOffer], may_span: bool, whole: bool, packed: bool = False
) -> list[Placement]:
    """Every family and span size the denoising loop fits, cheapest first. `whole`: the loop's
    GPUs encode and decode too (one "render" placement). Priced as `_price` says."""
    placements = []
    for family in sorted({o.family for o in offers}):
        dtype = compute_dtype(family)
        alone = step_seconds(video.arch, video.width, video.height, video.frames, family, dtype)
        spans = [n for n in SPAN_SIZES if may_span and n <= _largest(offers, family)]
        for gpus in (1, *spans):
            need = denoise_need_gib(video, dtype, gpus, with_text_encoder=whole)
            kind = _offer_for(offers, family, gpus, need, packed)
            if kind is None:
                continue
            seconds = video.steps * span_step_seconds(video, alone, gpus, kind.instance_type)
            if whole:
                seconds += encode_seconds(family) + decode_seconds(video, family)
            stage = "render" if whole else "denoise"
            cost = seconds * _price(kind, gpus, packed)
            placements.append(Placement(stage, family, gpus, seconds, need, cost))
    return sorted(placements, key=lambda p: (p.cost, p.seconds, p.family, p.gpus))


def _offer_for(
    offers: Sequence[GpuOffer], family: str, gpus: int, need_gib: float, packed: bool
) -> GpuOffer | None:
    """The type a placement of `gpus` GPUs of the family is bought as: the cheapest per GPU
    when the fleet fills every GPU (`packed`), else the cheapest whole instance that holds it."""
    fitting = [
        o for o in offers if o.family == family and o.gpus >= gpus and o.vram_gib >= need_gib
    ]
    if not fitting:
        return None
    return min(fitting, key=lambda o: (_price(o, gpus, packed), o.instance_type))


def _price(offer: GpuOffer, gpus: int, packed: bool) -> float:
    """Per second, for `gpus` of the offer's GPUs. Unpacked, a job pays the whole instance: a
    queue too thin to fill its other GPUs leaves them idle, and the planner does not assume
    otherwise (the fleet fills them where it can, which only lowers the cost)."""
    if packed:
        return offer.price_per_gpu_second * gpus
    return offer.price_per_hour / 3600


def _side_stage(
    stage: str, video: Video, offers: Sequence[GpuOffer], need_gib: float, packed: bool
) -> Placement | None:
    best: Placement | None = None
    for family in sorted({o.family for o in offers}):
        offer = _offer_for(offers, family, 1, need_gib, packed)
        if offer is None:
            continue
        work = encode_seconds(family) if stage == "encode" else decode_seconds(video, family)
        seconds = work + STAGE_OVERHEAD_SECONDS
        placement = Placement(
            stage, family, 1, seconds, need_gib, seconds * _price(offer, 1, packed)
        )
        if best is None or placement.cost < best.cost:
            best = placement
    return best


def _within(placements: list[Placement], window: float | None) -> list[Placement]:
    """Those that finish within `window` seconds; if none does, the fastest first."""
    if window is None:
        return placements
    meeting = [p for p in placements if p.seconds <= window]
    return meeting or sorted(placements, key=lambda p: (p.seconds, p.cost))


def plan_render(
    video: Video,
    offers: Sequence[GpuOffer],
    may_span: bool,
    may_split: bool,
    window_seconds: float | None = None,
    wait_seconds: float = 0.0,
    packed: bool = False,
) -> RenderPlan | None:
    """The cheapest way to render `video` that finishes within `window_seconds` (the time to
    its deadline), each stage starting `wait_seconds` after it may (a boot, a queue), or the
    quickest where none does. A split is chosen only where it saves `SPLIT_MARGIN` of the
    cost, or where only it meets the deadline. None: nothing offered holds the render."""

    def budget(stages: int) -> float | None:
        return None if window_seconds is None else window_seconds - stages * wait_seconds

    plans = []
    whole = _within(denoise_placements(video, offers, may_span, True, packed), budget(1))
    if whole:
        plans.append(RenderPlan((whole[0],), "one place"))
    if may_split:
        encode = _side_stage("encode", video, offers, encode_need_gib(Dtype.BF16), packed)
        decode = _side_stage("decode", video, offers, decode_need_gib(video), packed)
        if encode is not None and decode is not None:
            left = budget(3)
            if left is not None:
                left -= encode.seconds + decode.seconds
            cores = _within(denoise_placements(video, offers, may_span, False, packed), left)
            if cores:
                plans.append(RenderPlan((encode, cores[0], decode), "stages"))
    if not plans:
        return None

    def finish(plan: RenderPlan) -> float:
        return plan.seconds + len(plan.stages) * wait_seconds

    meeting = [p for p in plans if window_seconds is None or finish(p) <= window_seconds]
    if not meeting:
        quickest = min(plans, key=finish)
        return RenderPlan(quickest.stages, "misses its deadline at best; the quickest way")
    if len(meeting) == 1:
        only = meeting[0]
        if len(plans) == 1:
            return RenderPlan(only.stages, "only as stages does it fit" if only.split else only.why)
        return RenderPlan(only.stages, "only this way does it meet its deadline")
    unsplit, split = meeting
    if split.cost < unsplit.cost * (1 - SPLIT_MARGIN):
        return RenderPlan(split.stages, f"stages save {1 - split.cost / unsplit.cost:.0%}")
    return RenderPlan(unsplit.stages, "a split would not save enough")
