"""A render spanning 2 and 4 processes (context parallelism, gloo on a CPU): interrupted at a
checkpoint and resumed in a fresh group of as many processes, its latents and frames are bit for
bit those of the uninterrupted run of that many."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np
import pytest

from framefleet.local_ports import free_port
from kernel.job_spec import parse_job
from tests.support.jobs import job_dict
from tests.support.spanned_render import render_rank
from worker_ami.agent.context_parallel import why_not_span


@pytest.mark.parametrize("processes", [2, 4])
def test_a_spanned_render_resumes_bit_for_bit(
    processes: int, four_head_model: Path, tmp_path: Path
) -> None:
    spec = parse_job(job_dict("spanned", steps=4), now=None)
    ports, context = (free_port(), free_port()), multiprocessing.get_context("spawn")
    ranks = [
        context.Process(
            target=render_rank, args=(rank, processes, ports, four_head_model, spec, tmp_path)
        )
        for rank in range(processes)
    ]
    for rank in ranks:
        rank.start()
    for rank in ranks:
        rank.join(timeout=600)
    assert [rank.exitcode for rank in ranks] == [0] * processes
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    assert (whole / "checkpoint").is_dir()
    assert (whole / "latents.safetensors").read_bytes() == (
        resumed / "latents.safetensors"
    ).read_bytes()
    assert np.array_equal(np.load(whole / "frames.npy"), np.load(resumed / "frames.npy"))


def test_ulysses_needs_heads_that_divide_among_the_processes() -> None:
    assert why_not_span(4, 2) is None
    assert why_not_span(2, 4) == "2 attention heads do not divide among 4 GPUs"
    assert why_not_span(2, 4, "ring") is None
    assert why_not_span(12, 1) is None
