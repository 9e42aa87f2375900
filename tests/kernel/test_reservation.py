"""A reservation's claim and its deadline guard (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kernel.job_record import Reservation

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def test_the_claim_holds_until_it_expires_or_is_used_up() -> None:
    claim = Reservation("j", "i-a", True, NOW + timedelta(minutes=5))
    assert claim.holds(NOW)
    assert not claim.holds(NOW + timedelta(minutes=5))
    assert not Reservation("j", "", True, NOW + timedelta(minutes=5)).holds(NOW)


def test_spot_until_leaves_the_remaining_work_and_one_interruption_before_the_deadline() -> None:
    paced = Reservation("j", "", False, NOW, seconds_per_step=2.0, margin_seconds=900.0)
    deadline = NOW + timedelta(hours=2)
    # 1,000 steps left at 2 s: 2,000 s of work plus 900 s of margin before the deadline.
    assert paced.spot_until(deadline, 1000) == deadline - timedelta(seconds=2900)
    assert paced.spot_until(None, 1000) is None
    assert Reservation("j", "", False, NOW).spot_until(deadline, 1000) is None  # pace unknown
