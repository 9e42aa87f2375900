"""Faults injected into the trace-driven fleet simulation, run by the real control plane: with
detection on (the simulated agents' watchdog, the control plane's watch and quarantine),
hung jobs are killed and resumed and sick GPUs quarantined and replaced, and the faults waste
a small fraction of what they waste with detection off. No job finishes twice either way."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from autoscaler.market.trace import load_trace
from kernel.fleet_facts import GpuFaultKind
from simulator.fleet import FleetSimulation
from simulator.fleet_faults import FaultWaste, FleetFaults
from simulator.fleet_setup import setup_for_changeover
from simulator.workload import daily_poisson
from tests.support.paths import TEST_TRACES

REAL_TRACES = TEST_TRACES / "v100-week"
# Far above realistic rates, so that two days of a small fleet see every kind of fault.
OFTEN = FleetFaults(hangs_per_job_hour=0.1, sick_gpus_per_gpu_week=3.0, seed=2)


async def run(faults: FleetFaults, folder: Path) -> tuple[FaultWaste, list[GpuFaultKind], int]:
    trace = load_trace(REAL_TRACES)
    setup = replace(setup_for_changeover(0.2), faults=faults)
    # The trace's last 30 hours: a job that hangs with detection off holds its GPU to the end.
    start = trace.ticks - int(timedelta(hours=30) / trace.gap)
    simulation = FleetSimulation(trace, daily_poisson(40, 1, seed=5), setup, start, folder / "db")
    try:
        result = await simulation.run()
        return (
            simulation.waste,
            [f.kind for f in simulation.store.faults.gpu_faults()],
            result.finished_twice,
        )
    finally:
        simulation.store.dispose()


async def test_detection_in_the_fleet_simulation_wastes_a_fraction_of_what_faults_waste_without(
    tmp_path: Path,
) -> None:
    (tmp_path / "on").mkdir()
    (tmp_path / "off").mkdir()
    on, found_on, twice_on = await run(OFTEN, tmp_path / "on")
    off, found_off, twice_off = await run(replace(OFTEN, detection=False), tmp_path / "off")
    assert twice_on == twice_off == 0
    # Detection on: the workers' watchdog killed hung steps, the control plane recorded each
    # stall with its GPU (and any its own backstop found: a job with no first step within
    # `before_first_step_seconds`) and quarantined sick GPUs.
    assert on.stall_kills > 0
    assert found_on.count(GpuFaultKind.STALL) >= on.stall_kills
    assert GpuFaultKind.QUARANTINE in found_on
    # Off: nothing is looked for, and hung jobs hold their GPUs.
    assert off.stall_kills == 0
    assert found_off == []
    assert off.stalled > 0
    assert on.total() < 0.1 * off.total()
