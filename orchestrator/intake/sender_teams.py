"""Teams from credentials, not from the message: with `sender_teams` set, an SQS job's team is
its sender's (SQS's SenderId, the IAM identity that sent it, mapped to teams in settings). A job
that names no team takes its sender's first; one that claims a team its sender does not have is
refused with the reason. Without the mapping the message's own tag stands (one queue per team,
each writable by that team's role only, is the other way to tie teams to credentials).
"""

from __future__ import annotations

from collections.abc import Mapping

from kernel.job_spec import JobSpec


def sender_team(
    spec: JobSpec, sender: str, sender_teams: Mapping[str, tuple[str, ...]]
) -> JobSpec | str:
    """The job with its sender's team, or why its sender may not submit it."""
    if not sender_teams:
        return spec
    # An assumed role's SenderId is "AROA...:session-name": the role decides, not the session.
    teams = sender_teams.get(sender) or sender_teams.get(sender.split(":", 1)[0]) or ()
    claimed = spec.tags.team
    if claimed is None:
        if not teams:
            return spec  # the default team's (`scheduling.default_team`)
        return spec.model_copy(update={"tags": spec.tags.model_copy(update={"team": teams[0]})})
    if claimed not in teams:
        allowed = ", ".join(teams) or "no team"
        return f"sender {sender!r} submits for {allowed}; the job claims team {claimed!r}"
    return spec
