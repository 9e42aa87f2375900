"""The demo's verdict and settings files: a lost, duplicated, failed or late job fails the run;
the settings it writes are read back by the processes as written."""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import tomli_w

from framefleet.demo_outputs import ResumeCheck
from framefleet.demo_report import Interruptions, Verdict, judge, resumed_from_checkpoint
from framefleet.demo_tables import RunFacts
from framefleet.settings import Settings
from kernel.job_record import JobEvent
from kernel.job_spec import CostTags
from kernel.job_state import JobState
from orchestrator.store.cost_facts import AttemptSpan
from tests.support.jobs import record

NOW = datetime(2026, 12, 3, 12, tzinfo=UTC)


def event(job_id: str, to: JobState, at: datetime, attempt: int = 1) -> JobEvent:
    return JobEvent(job_id, at, None, to, 1, attempt, "test", "")


def test_every_way_a_job_can_go_wrong_fails_the_run() -> None:
    later = NOW + timedelta(minutes=5)
    records = {
        "fine": record("fine", JobState.SUCCEEDED, deadline=later),
        "late": record("late", JobState.SUCCEEDED, deadline=NOW),
        "twice": record("twice", JobState.SUCCEEDED),
        "broken": record("broken", JobState.FAILED),
        "stuck": record("stuck", JobState.RUNNING),
        "stuck-due": record("stuck-due", JobState.RUNNING, deadline=later),
    }
    histories = {
        "fine": [event("fine", JobState.SUCCEEDED, NOW + timedelta(minutes=1))],
        "late": [event("late", JobState.SUCCEEDED, NOW + timedelta(minutes=1))],
        "twice": [event("twice", JobState.SUCCEEDED, NOW)] * 2,
        "broken": [event("broken", JobState.FAILED, NOW)],
        "stuck": [],
        "stuck-due": [],
    }
    end = NOW + timedelta(minutes=10)
    verdict = judge([*records, "never-stored"], records, histories, end)
    assert verdict.succeeded == ["fine", "late", "twice"]
    # Unfinished past its deadline is a miss as well; a deadline met is one of three.
    assert verdict.late == ["late", "stuck-due"]
    assert verdict.with_deadline == 3
    assert verdict.duplicated == ["twice"]
    assert verdict.failed == ["broken"]
    # Unfinished at the timeout is not lost: lost is a job the store no longer has.
    assert verdict.unfinished == ["stuck", "stuck-due"]
    assert verdict.lost == ["never-stored"]
    assert not verdict.ok
    assert judge(["fine"], records, histories, end).ok
    assert not judge(["stuck"], records, histories, end).ok


def span(attempt: int, instance_id: str, checkpointed: bool) -> AttemptSpan:
    return AttemptSpan(
        "j",
        attempt,
        instance_id,
        0,
        NOW,
        NOW,
        "preempted",
        0.0,
        0.0,
        int(checkpointed),
        NOW if checkpointed else None,
        CostTags(),
        2.0,
    )


def test_a_job_went_on_from_a_checkpoint_only_on_another_instance() -> None:
    assert resumed_from_checkpoint([span(2, "i-2", False), span(1, "i-1", True)])
    assert not resumed_from_checkpoint([span(1, "i-1", False), span(2, "i-2", False)])
    assert not resumed_from_checkpoint([span(1, "i-1", True), span(2, "i-1", False)])


def test_the_settings_file_reads_back_as_written(tmp_path: Path) -> None:
    values = {
        "endpoint_url": 'http://127.0.0.1:5000/"quoted"',
        "autoscaler": {
            "zones": ["us-east-1a", "us-east-1c"],
            "interval_seconds": 2.0,
            "subnets": {"us-east-1a": "subnet-1"},
            "use_create_fleet": False,
        },
        "replay": {"trace": str(tmp_path), "start": NOW, "epoch": NOW, "speed": 240.0},
    }
    text = tomli_w.dumps(values)
    assert tomllib.loads(text)["autoscaler"]["subnets"] == {"us-east-1a": "subnet-1"}
    settings = Settings.model_validate(tomllib.loads(text))
    assert settings.endpoint_url == values["endpoint_url"]
    assert settings.autoscaler.zones == ["us-east-1a", "us-east-1c"]
    assert settings.autoscaler.use_create_fleet is False
    assert settings.replay is not None
    assert settings.replay.speed == 240.0
    assert settings.replay.clock().now() >= NOW


def test_a_run_without_its_story_fails_and_says_what_is_missing() -> None:
    """Before, a run with 12 spot notices, none on a running job, and no resume still said OK:
    the first thing a newcomer sees showed nothing of what the product is for."""

    def facts(noticed_busy: int, checks: list[ResumeCheck]) -> RunFacts:
        return RunFacts(
            Verdict(succeeded=["a"]),
            Interruptions(noticed=12, silent=1, noticed_busy=noticed_busy),
            None,  # type: ignore[arg-type]  # the cost is not part of the story
            1,
            checks,
            len(checks),
            [],
            0.0,
        )

    quiet = facts(0, [])
    assert not quiet.ok
    assert quiet.story_missing == [
        "no spot notice reached an instance running a job",
        "no job went on elsewhere from its checkpoint",
    ]
    differs = facts(1, [ResumeCheck("a", "1" * 64, "2" * 64)])
    assert differs.story_missing == ["a resumed video differs from its uninterrupted render"]
    told = facts(1, [ResumeCheck("a", "1" * 64, "1" * 64)])
    assert told.ok
