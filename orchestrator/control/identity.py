"""Who a worker is and what it has: from its credentials and from AWS, never from its word.

The broker lets a worker publish only under its own account's topics, and the autoscaler names
each worker's account by its instance id (`autoscaler.credentials`). So the worker id in the
topic is the one fact a hello cannot forge: a hello naming another instance is refused. The
hardware a hello claims is clamped to its instance type's (the catalogue, from EC2's
DescribeInstanceTypes; a MIG slot to a slice of one of its GPUs, the slices of a GPU together
no more than it), and the type and market are EC2's when the autoscaler has seen the
instance; a claim beyond them is flagged. A worker off EC2 (no instance, a workstation) has no
one to vouch for it: it is believed only where the operator allows such workers.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernel.instance_types import CATALOG, InstanceKind
from kernel.market import Market, is_slice_of, mig_family
from kernel.worker_protocol import GpuInfo, Hello
from orchestrator.control.admission import Refused


@dataclass(frozen=True)
class KnownInstance:
    """An instance as EC2 described it to the autoscaler (the store's instance lives)."""

    instance_type: str
    market: Market


@dataclass(frozen=True)
class VettedHello:
    """The hello the control plane believes, and what its worker claimed beyond it."""

    hello: Hello
    clamped: tuple[str, ...] = ()


UNLISTED = "unlisted_instance"  # the refusal a hello waits out (`Reception` keeps it)


def vet_hello(
    hello: Hello, known: KnownInstance | None, workers_off_ec2: bool
) -> VettedHello | Refused:
    if hello.instance_id is None:
        if not workers_off_ec2:
            return Refused("off_ec2_worker", "a hello from no EC2 instance is not believed here")
        return VettedHello(hello)  # its own instance, in effect (`Hello.instance`)
    if hello.instance_id != hello.worker_id:
        return Refused(
            "foreign_instance",
            f"worker {hello.worker_id} speaks for its own instance only, not {hello.instance_id}",
        )
    if known is None and not workers_off_ec2:
        # Believed on its word, a hello claiming eight H100s got eight jobs (issue 48): an
        # instance the autoscaler did not launch gets no work until it is listed.
        return Refused(
            UNLISTED,
            f"instance {hello.instance_id} is not one the autoscaler launched: no work until it is",
        )
    instance_type = known.instance_type if known else hello.instance_type
    kind = CATALOG.get(instance_type)
    if kind is None:
        if workers_off_ec2:
            return VettedHello(hello)  # a development fleet's own types, believed as asked
        return Refused("unknown_instance_type", f"no GPU instance type {instance_type!r}")
    return _clamped(hello, kind, known)


# A whole GPU reporting less memory than the catalogue has for its type (ECC on, a driver's
# reserve) is what the scheduler will assign by, so the autoscaler must buy by it too. A report
# far below is a fault (or a lie), not a measurement, and is not learnt.
LEAST_LEARNT_SHARE = 0.9


def reported_memory(hello: Hello, kind: InstanceKind) -> float | None:
    """The memory per GPU a believed hello reports where it is below the catalogue's figure
    for its type and still a measurement; None otherwise (slots of a shared or sliced GPU say
    nothing of the whole)."""
    whole = [gpu.vram_gib for gpu in hello.gpus if gpu.physical is None]
    if not whole:
        return None
    least = min(whole)
    if least >= kind.vram_gib or least < kind.vram_gib * LEAST_LEARNT_SHARE:
        return None
    return least


def _clamped(
    hello: Hello, kind: InstanceKind, known: KnownInstance | None
) -> VettedHello | Refused:
    claims: list[str] = []
    if hello.instance_type != kind.instance_type:
        claims.append(f"type {hello.instance_type} (EC2 says {kind.instance_type})")
    market = known.market if known else hello.market
    if hello.market is not market:
        claims.append(f"market {hello.market.value} (EC2 says {market.value})")
    gpus: dict[int, GpuInfo] = {}
    # Of each GPU, the compute and memory its slots so far take: a GPU's MIG slots together
    # have no more than it.
    parts: dict[int, tuple[float, float]] = {}
    for gpu in hello.gpus:
        physical = gpu.index if gpu.physical is None else gpu.physical
        if physical >= kind.gpus or gpu.index in gpus:
            continue
        believed = _believed(gpu, kind)
        compute, memory = parts.get(physical, (0.0, 0.0))
        compute, memory = compute + believed.compute_share, memory + believed.vram_gib
        if compute > 1 + 1e-6 or memory > kind.vram_gib + 1e-6:
            continue
        if believed != gpu:
            claims.append(f"GPU {gpu.index} as {gpu.family} with {gpu.vram_gib:g} GiB")
        gpus[gpu.index] = believed
        parts[physical] = (compute, memory)
    if len(gpus) < len(hello.gpus):
        claims.append(f"{len(hello.gpus)} GPUs ({kind.instance_type} has {kind.gpus})")
    if not gpus:
        return Refused(
            "unknown_hardware", f"no GPU a {kind.instance_type} has: {'; '.join(claims)}"
        )
    believed_hello = hello.model_copy(
        update={
            "instance_type": kind.instance_type,
            "market": market,
            "gpus": tuple(gpus[i] for i in sorted(gpus)),
        }
    )
    return VettedHello(believed_hello, tuple(claims))


def _believed(gpu: GpuInfo, kind: InstanceKind) -> GpuInfo:
    """A slot as its type allows: the type's family (a MIG slot: a slice of it), no more
    memory than the type's GPU has; a MIG slot keeps its GPU and part of it."""
    vram = min(gpu.vram_gib, kind.vram_gib)
    whole = kind.family.value
    if gpu.physical is None:
        return GpuInfo(index=gpu.index, family=whole, vram_gib=vram)
    if is_slice_of(gpu.family, whole):
        family = gpu.family
    else:  # a whole GPU or a turn on one; or a slice of a family the type has not, clamped
        split = gpu.compute_share < 1 and not gpu.time_shared
        family = mig_family(whole, 0) if split else whole
    return GpuInfo(
        index=gpu.index,
        family=family,
        vram_gib=vram,
        physical=gpu.physical,
        compute_share=gpu.compute_share,
        time_shared=gpu.time_shared,
    )
