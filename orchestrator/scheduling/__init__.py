"""Pure scheduling policy: (jobs snapshot, workers snapshot, now) -> assignments, preemptions."""
