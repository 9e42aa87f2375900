"""A job's render across two render processes of this instance (CPU processes here, gloo between
them), driven in lockstep by the agent's SpannedRender: checkpointed, then resumed in two fresh
processes, its video is the uninterrupted one's byte for byte; one process dying ends both at
once."""

from __future__ import annotations

from pathlib import Path

import pytest

from framefleet.local_ports import free_port
from kernel.job_spec import JobSpec, parse_job
from tests.support.jobs import job_dict
from tests.support.renders import CPU_RECIPE
from worker_ami.agent.errors import WorkerError
from worker_ami.agent.render_limits import RenderLimits
from worker_ami.agent.render_session import RenderSession
from worker_ami.agent.spanned_render import SpannedRender
from worker_ami.agent.state_codec import decode_state

LIMITS = RenderLimits(threads=1)
BOUND_S = 120.0


async def started(scratch: Path) -> SpannedRender:
    render = await SpannedRender.start(
        ["cpu", "cpu"], LIMITS, scratch, None, f"127.0.0.1:{free_port()}"
    )
    session: RenderSession = render  # the runner's port: it drives either kind alike
    assert session is render
    return render


def spec() -> JobSpec:
    return parse_job(job_dict("spanned", steps=4), now=None)


async def test_a_spanned_job_resumes_in_fresh_processes_to_the_same_video(
    four_head_model: Path, tmp_path: Path
) -> None:
    job = spec()
    render = await started(tmp_path)
    try:
        assert (await render.open(four_head_model, CPU_RECIPE, job, None, BOUND_S)).step == 0
        for _ in range(2):
            await render.step(BOUND_S)
        at, blobs = await render.checkpoint(BOUND_S)
        while await render.step(BOUND_S) < job.steps:
            pass
        whole, frames = await render.video(job.fps, BOUND_S)
    finally:
        await render.close()
    assert at == 2
    assert frames == job.num_frames

    resumed = await started(tmp_path)
    try:
        opened = await resumed.open(four_head_model, CPU_RECIPE, job, decode_state(blobs), BOUND_S)
        assert opened.step == 2
        while await resumed.step(BOUND_S) < job.steps:
            pass
        again, _ = await resumed.video(job.fps, BOUND_S)
    finally:
        await resumed.close()
    assert again == whole


async def test_one_process_dying_ends_the_other_at_once(
    four_head_model: Path, tmp_path: Path
) -> None:
    render = await started(tmp_path)
    try:
        await render.open(four_head_model, CPU_RECIPE, spec(), None, BOUND_S)
        await render.step(BOUND_S)
        render._processes[1]._process.kill()  # its GPU fell off the bus
        with pytest.raises(WorkerError):
            await render.step(BOUND_S)  # the other waits on it in a collective: ended too
        assert not render.alive
        assert not render._processes[0].alive
    finally:
        await render.close()
