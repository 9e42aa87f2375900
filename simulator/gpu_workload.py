"""The mixed video workload of issue 35's fleet benchmark, and the instance types it may buy.

Three kinds of job arrive by one Poisson process: 480p renders of the 1.3B model (81 frames,
50 steps, no deadline), short 1.3B previews (256x448, 17 frames, 30 steps, no deadline) and
720p renders of the 14B model (81 frames, 50 steps) due a few hours after they arrive.
Offers are the catalogued GPU types at their on-demand list prices in us-east-1: what a GPU
costs is this benchmark's subject, not what the spot market takes off it (the spot benchmarks
measure that, and it applies to every configuration alike).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autoscaler.market.on_demand import fallback_price
from autoscaler.render_plan import GpuOffer
from kernel.instance_types import CATALOG
from kernel.stage_cost import Video
from kernel.step_time import WAN_1_3B, WAN_14B

REGION = "us-east-1"
RENDER_480P = Video(WAN_1_3B, 832, 480, 81, 50)
PREVIEW = Video(WAN_1_3B, 448, 256, 17, 30)
RENDER_720P_14B = Video(WAN_14B, 1280, 720, 81, 50)
# Past an L40S whole (46.8 GiB), its denoising stage alone fits one (36.1 GiB).
RENDER_480P_14B = Video(WAN_14B, 832, 480, 81, 50)
KINDS = {"480p 1.3B": RENDER_480P, "preview 1.3B": PREVIEW, "720p 14B": RENDER_720P_14B}


@dataclass(frozen=True)
class VideoJob:
    job_id: str
    kind: str  # a key of KINDS
    arrival_s: float  # from the start of the run
    deadline_s: float | None  # from the start of the run; None: none

    @property
    def video(self) -> Video:
        return KINDS[self.kind]


@dataclass(frozen=True)
class Mix:
    """Shares of each kind of job, and the 14B renders' time from arrival to deadline."""

    render_480p: float = 0.55
    preview: float = 0.30
    render_720p_14b: float = 0.15
    deadline_hours_14b: tuple[float, float] = (1.0, 3.0)  # uniform between


def mixed_workload(count: int, hours: float, seed: int, mix: Mix = Mix()) -> list[VideoJob]:
    rng = np.random.default_rng(seed)
    arrivals = np.sort(rng.uniform(0.0, hours * 3600, count))
    shares = np.array([mix.render_480p, mix.preview, mix.render_720p_14b])
    kinds = rng.choice(list(KINDS), size=count, p=shares / shares.sum())
    jobs = []
    for index, (at, kind) in enumerate(zip(arrivals, kinds, strict=True)):
        hours_to_deadline = float(rng.uniform(*mix.deadline_hours_14b))
        deadline = float(at) + hours_to_deadline * 3600 if kind == "720p 14B" else None
        jobs.append(VideoJob(f"video-{index:04d}", str(kind), float(at), deadline))
    return jobs


def list_price_offers(region: str = REGION) -> list[GpuOffer]:
    offers = []
    for kind in CATALOG.values():
        price = fallback_price(region, kind.instance_type)
        if price is not None:
            offers.append(
                GpuOffer(kind.instance_type, kind.family.value, kind.gpus, kind.vram_gib, price)
            )
    return sorted(offers, key=lambda o: o.instance_type)
