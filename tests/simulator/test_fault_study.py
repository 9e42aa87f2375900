"""The wasted-GPU-hours study: detection cuts the waste of injected faults by far more than
90%, and over a week without faults it kills no healthy job and quarantines no healthy GPU."""

from __future__ import annotations

from simulator.fault_study import Detection, FaultRates, FleetShape, study

SMALL = FleetShape(gpus=32)
# Faults often enough that a small fleet's week has each kind.
FREQUENT = FaultRates(hangs_per_job_hour=1 / 100, sick_gpus_per_gpu_week=0.25)


def test_detection_cuts_the_waste_of_injected_faults_by_more_than_90_percent() -> None:
    off = study(FREQUENT, SMALL, Detection.OFF, seed=7)
    timeout = study(FREQUENT, SMALL, Detection.TIMEOUT, seed=7)
    on = study(FREQUENT, SMALL, Detection.ON, seed=7)
    assert off.hangs > 0
    assert off.sick_gpus > 0
    # Without detection, hung jobs hold their GPUs and sick GPUs keep taking work.
    assert off.waste_s.stalled > 0
    assert off.waste_s.slow + off.waste_s.doomed > 0
    assert on.waste_s.total() < 0.1 * off.waste_s.total()
    # The timeout baseline helps, and detection still wastes less than it.
    assert on.waste_s.total() < timeout.waste_s.total() < off.waste_s.total()
    assert on.stall_kills > 0
    assert on.quarantines > 0
    assert on.jobs_done > off.jobs_done


def test_a_week_without_faults_kills_no_healthy_job_and_quarantines_no_healthy_gpu() -> None:
    for seed in range(2):
        healthy = study(FaultRates.none(), SMALL, Detection.ON, seed=seed)
        assert healthy.jobs_done > 10_000
        assert healthy.stall_kills == healthy.healthy_jobs_killed == 0
        assert healthy.quarantines == healthy.healthy_gpus_quarantined == 0
        assert healthy.waste_s.total() == 0


def test_the_same_seed_gives_the_same_week() -> None:
    first = study(FREQUENT, SMALL, Detection.ON, seed=3)
    again = study(FREQUENT, SMALL, Detection.ON, seed=3)
    assert first == again
