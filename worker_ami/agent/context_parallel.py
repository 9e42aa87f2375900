"""One render across several GPUs (a job's `gpu.count`): a render process per GPU, all in one
torch.distributed process group, the transformer's attention split across them by diffusers'
context parallelism.

Ulysses by default: each process attends over the whole video for its share of the attention
heads (so the heads must divide among the processes), which needs no more of the attention
kernel than a single GPU does. Ring, where the kernel returns its log-sum-exp (flash attention
on a GPU), splits the sequence instead. Everything outside the transformer runs the same on
every process, so every process holds the same latents after each step: the first process's
state is the job's one checkpoint, and a resume loads it in every process of the new group.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from worker_ami.agent.errors import JobFault

if TYPE_CHECKING:
    from diffusers import WanPipeline

SpanKind = Literal["ulysses", "ring"]
# How long a process waits for the others of its group (they start together on one instance).
JOIN_TIMEOUT = timedelta(minutes=5)


@dataclass(frozen=True)
class Span:
    """This process's place in a render across `processes` GPUs."""

    processes: int
    rank: int
    rendezvous: str  # host:port where the group meets (the first process listens)
    kind: SpanKind = "ulysses"

    @property
    def writes(self) -> bool:
        """The one process that writes the job's checkpoints and video."""
        return self.rank == 0


def why_not_span(heads: int, processes: int, kind: SpanKind = "ulysses") -> str | None:
    """None when the model's attention can be split this way; else why not."""
    if processes < 2:
        return None
    if kind == "ulysses" and heads % processes:
        return f"{heads} attention heads do not divide among {processes} GPUs"
    return None


def join(span: Span, device: str) -> None:
    """Join the render's process group (NCCL between GPUs, gloo on a CPU)."""
    dist.init_process_group(
        "nccl" if device.startswith("cuda") else "gloo",
        init_method=f"tcp://{span.rendezvous}",
        rank=span.rank,
        world_size=span.processes,
        timeout=JOIN_TIMEOUT,
    )


def leave() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def span_transformer(pipe: WanPipeline, span: Span, device: str) -> None:
    """Split each expert's attention across the group (after `join`): the transformer, and
    Wan 2.2's second where the pipeline has one."""
    for transformer in (pipe.transformer, getattr(pipe, "transformer_2", None)):
        if transformer is not None:
            _span_one(transformer, span, device)


def _span_one(transformer: Any, span: Span, device: str) -> None:
    # Here, not at the top: the agent reads `Span` from this module and never loads diffusers.
    from diffusers.models._modeling_parallel import ContextParallelConfig, ParallelConfig

    why = why_not_span(int(transformer.config.num_attention_heads), span.processes, span.kind)
    if why is not None:
        raise JobFault(why)
    config = (
        ContextParallelConfig(ulysses_degree=span.processes)
        if span.kind == "ulysses"
        else ContextParallelConfig(ring_degree=span.processes)
    )
    if not device.startswith("cuda"):
        # diffusers builds its device mesh for an accelerator only (it takes the rank modulo
        # the accelerators' count); on a CPU the mesh is gloo's, built here the same way.
        def on_cpu(given: ContextParallelConfig) -> ParallelConfig:
            resolved = ParallelConfig(context_parallel_config=given)
            mesh = init_device_mesh(
                "cpu", mesh_shape=given.mesh_shape, mesh_dim_names=given.mesh_dim_names
            )
            resolved.setup(span.rank, span.processes, torch.device("cpu"), mesh=mesh)
            transformer._parallel_config = resolved
            return resolved

        transformer._resolve_parallel_config = on_cpu
    transformer.enable_parallelism(config=config)
