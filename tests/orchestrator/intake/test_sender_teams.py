"""Teams from credentials, not from the message: an SQS job's team is its sender's; a job
claiming a team its sender does not have is refused with the reason; a job with no team falls
under the default team, whose quota limits it like any team's."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from kernel.clock import FakeClock
from kernel.job_spec import JobSpec, parse_job
from kernel.job_state import JobState
from orchestrator.control.scheduling_view import pending_jobs
from orchestrator.intake.sender_teams import sender_team
from orchestrator.scheduling.policy import schedule
from orchestrator.scheduling.quotas import TeamQuota
from orchestrator.scheduling.registry import WorkerRegistry
from orchestrator.scheduling.snapshots import GpuSlot, SchedulerSettings, WorkerSnapshot
from tests.support.jobs import job_dict, record

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
RESEARCH_ROLE = "AROAEXAMPLEROLEID0001"
MAPPING = {RESEARCH_ROLE: ("research", "vfx"), "AIDAPRODUCER": ("marketing",)}


def spec(team: str | None) -> JobSpec:
    tags = {"team": team} if team else {}
    return parse_job(job_dict("j", tags=tags), now=None)


def test_a_job_claiming_a_team_its_sender_lacks_is_refused_with_the_reason() -> None:
    # Before, a message named its own team: anyone who could send could spend another's quota.
    refused = sender_team(spec("marketing"), f"{RESEARCH_ROLE}:ci-session", MAPPING)
    assert refused == (
        f"sender '{RESEARCH_ROLE}:ci-session' submits for research, vfx; "
        "the job claims team 'marketing'"
    )
    assert isinstance(sender_team(spec("vfx"), f"{RESEARCH_ROLE}:ci", MAPPING), JobSpec)
    unknown = sender_team(spec("research"), "AIDASOMEONEELSE", MAPPING)
    assert isinstance(unknown, str)
    assert "submits for no team" in unknown


def test_a_job_naming_no_team_takes_its_senders_and_without_a_mapping_the_tag_stands() -> None:
    teamed = sender_team(spec(None), RESEARCH_ROLE, MAPPING)
    assert isinstance(teamed, JobSpec)
    assert teamed.tags.team == "research"
    assert sender_team(spec("anything"), "AIDAX", {}) == spec("anything")


def test_jobs_without_a_team_fall_under_the_default_teams_quota() -> None:
    # Before, a job with no team was never limited, whatever the quotas said.
    teamless = [replace(record(f"t{i}", JobState.QUEUED), spec=spec(None)) for i in range(3)]
    pending = pending_jobs(teamless, {}, WorkerRegistry(FakeClock(NOW)), NOW)
    assert {p.team for p in pending} == {"default"}
    workers = [WorkerSnapshot(f"w{i}", (GpuSlot(f"w{i}", 0, "l4", 24),)) for i in range(3)]
    rules = SchedulerSettings(quotas={"default": TeamQuota({"*": 1}, borrow=False)})
    decided = schedule(pending, workers, NOW, rules)
    assert len(decided.assignments) == 1  # its share, however many GPUs are free
