"""The instance state machine: what the autoscaler knows of each instance, and why."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from autoscaler.ec2.ports import ObservedInstance
from autoscaler.instances import (
    InstanceBook,
    InstanceRecord,
    transition,
)
from autoscaler.pools import Pool
from kernel.errors import InvalidTransition
from kernel.instance_state import InstanceState
from kernel.market import Market

NOW = datetime(2026, 6, 1, tzinfo=UTC)
SPOT = Pool("g6.xlarge", "us-east-1a", Market.SPOT)
ON_DEMAND = Pool("g6.xlarge", "us-east-1a", Market.ON_DEMAND)


def observed(instance_id: str, pool: Pool) -> ObservedInstance:
    return ObservedInstance(instance_id, pool, "running", NOW)


def test_an_instance_asked_to_end_is_terminated_and_one_that_vanished_was_interrupted() -> None:
    book = InstanceBook()
    book.bought(observed("i-asked", SPOT), 0.8, NOW)
    book.bought(observed("i-taken", SPOT), 0.8, NOW)
    book.listed([observed("i-elsewhere", ON_DEMAND)], NOW)  # adopted
    book.worked(["i-asked", "i-taken"], NOW)
    assert book.spoken_for() == {"i-asked", "i-taken"}  # the adopted one never worked
    book.asked_to_end(["i-asked"], NOW, "idle for 10 minutes")
    assert book.gone("i-asked", SPOT, NOW) is InstanceState.TERMINATED
    assert book.gone("i-taken", SPOT, NOW) is InstanceState.INTERRUPTED
    assert book.gone("i-elsewhere", ON_DEMAND, NOW) is InstanceState.TERMINATED
    assert [(c.before, c.after, c.reason) for c in book.records["i-asked"].history] == [
        (InstanceState.BOOTING, InstanceState.WORKING, "a job ran on it"),
        (InstanceState.WORKING, InstanceState.TERMINATING, "idle for 10 minutes"),
        (InstanceState.TERMINATING, InstanceState.TERMINATED, "gone, as asked"),
    ]


def test_the_table_refuses_what_it_does_not_list() -> None:
    gone = InstanceRecord("i-1", SPOT, True, 0.8, NOW, InstanceState.INTERRUPTED)
    with pytest.raises(InvalidTransition, match="interrupted -> working"):
        transition(gone, InstanceState.WORKING, NOW, "a late heartbeat")


def test_records_of_instances_unlisted_for_a_day_are_dropped() -> None:
    book = InstanceBook()
    book.bought(observed("i-1", SPOT), 0.8, NOW)
    book.forget_long_gone(NOW + timedelta(hours=23))
    assert "i-1" in book.records
    book.forget_long_gone(NOW + timedelta(hours=25))
    assert book.records == {}
