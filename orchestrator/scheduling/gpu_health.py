"""When a GPU is sick (pure): what its heartbeat's NVML health shows, how its pace compares with
its family's, and when its faults add up to a quarantine.

- Uncorrected errors: any uncorrected ECC error, or a critical XID (the driver's own list of
  errors that need a reset or a new machine), quarantines at once; a retry there would compute
  on memory that cannot be trusted.
- Slow: a GPU whose steps take `slow_factor` times what its family's other GPUs take for the
  same work (the median pace of the same model and shape on that family), measured over
  `slow_min_steps` steps and `slow_min_seconds`, with at least `slow_min_peers` peers to compare
  with. Thermal and power throttling show up here, as the time they cost.
- Stalls: a GPU on which jobs stalled `stalls_to_quarantine` times.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from kernel.fleet_facts import GpuFault, GpuFaultKind
from kernel.worker_protocol import GpuHealth

# NVIDIA's XIDs that mean the GPU (or its memory, or its link) failed: 48 double-bit ECC,
# 63/64 row remapping, 74 NVLink, 79 fallen off the bus, 92 high single-bit ECC rate,
# 94/95 contained/uncontained ECC, 119/120 GSP errors.
CRITICAL_XIDS = frozenset({48, 63, 64, 74, 79, 92, 94, 95, 119, 120})


@dataclass(frozen=True)
class SickRule:
    slow_factor: float = 3.0
    slow_min_steps: int = 10
    slow_min_seconds: float = 120.0
    slow_min_peers: int = 3
    stalls_to_quarantine: int = 2


def errors_in(health: GpuHealth) -> str | None:
    """Why this reading alone makes the GPU sick, or None."""
    reasons = []
    if (health.ecc_uncorrected_errors or 0) > 0:
        reasons.append(f"{health.ecc_uncorrected_errors} uncorrected ECC errors")
    critical = sorted(set(health.xid_errors) & CRITICAL_XIDS)
    if critical:
        reasons.append("XID " + ", ".join(str(x) for x in critical))
    return "; ".join(reasons) or None


def too_slow(steps: int, seconds: float, peers: Sequence[float], rule: SickRule) -> str | None:
    """`steps` taken in `seconds` on this GPU, against its peers' seconds per step."""
    if steps < rule.slow_min_steps or seconds < rule.slow_min_seconds:
        return None
    if len(peers) < rule.slow_min_peers:
        return None
    family = statistics.median(peers)
    pace = seconds / steps
    if family <= 0 or pace < rule.slow_factor * family:
        return None
    return f"{pace:.2f} s per step, {pace / family:.1f}x its family's {family:.2f} s"


def since_release(faults: Sequence[GpuFault]) -> Sequence[GpuFault]:
    """The faults after an operator's last release of the GPU (oldest first): what still
    counts against it."""
    for index in range(len(faults) - 1, -1, -1):
        if faults[index].kind is GpuFaultKind.RELEASE:
            return faults[index + 1 :]
    return faults


def quarantine_reason(faults: Sequence[GpuFault], rule: SickRule) -> str | None:
    """The faults of one GPU (oldest first): why they quarantine it, or None."""
    faults = since_release(faults)
    for fault in faults:
        if fault.kind in (GpuFaultKind.ERRORS, GpuFaultKind.SLOW):
            return fault.detail
    stalls = [f for f in faults if f.kind is GpuFaultKind.STALL]
    if len(stalls) >= rule.stalls_to_quarantine:
        return f"{len(stalls)} stalls: " + "; ".join(f.detail for f in stalls[-2:])
    return None
