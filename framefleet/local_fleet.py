"""The local fleet runner (`framefleet fleet local`): instances in EC2 become worker processes
on this machine.

It watches EC2 (moto in the demo) for live instances with the fleet's tag and starts one
`framefleet-worker serve` process per instance, each with an IMDSv2 emulator of its own that
answers with that instance's id, type, zone and lifecycle, and CPU slots of its GPU family. An
instance terminated in EC2 ends its process: SIGTERM first (what systemd does on a shutdown),
SIGKILL after a grace period. With a trace replay, the spot market's interruptions reach the
workers too (framefleet/spot_replay.py).

Every step goes to a timeline file (JSON lines) that the demo reads.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoscaler.ec2.ports import Ec2Fleet, ObservedInstance
from framefleet.instance_boot import InstanceBoot
from kernel.clock import Clock, sleep_unless_stopped
from kernel.errors import FrameFleetError
from kernel.instance_types import kind_of
from kernel.market import Market
from worker_ami.agent.imds_emulator import ImdsEmulator, InstanceIdentity

log = logging.getLogger(__name__)
PollHook = Callable[[dict[str, ObservedInstance]], Awaitable[None]]


@dataclass(frozen=True)
class LocalFleetSettings:
    fleet_id: str
    workdir: Path  # one folder per instance: its model cache and its log
    timeline: Path
    worker_config: Path | None = None  # FRAMEFLEET_WORKER_CONFIG for every worker
    worker_env: dict[str, str] = field(default_factory=dict)
    poll_seconds: float = 0.5
    stop_grace_seconds: float = 10.0  # SIGTERM to SIGKILL when EC2 terminates an instance


class Timeline:
    """Append-only JSON lines: when what happened to which instance."""

    def __init__(self, path: Path, clock: Clock) -> None:
        self.path, self._clock = path, clock
        path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, kind: str, instance: ObservedInstance | None = None, **extra: Any) -> None:
        entry: dict[str, Any] = {"at": self._clock.now().isoformat(), "kind": kind}
        if instance is not None:
            entry |= {
                "instance_id": instance.instance_id,
                "instance_type": instance.pool.instance_type,
                "zone": instance.pool.availability_zone,
                "market": instance.pool.market.value,
            }
        with self.path.open("a") as file:
            file.write(json.dumps(entry | extra) + "\n")


@dataclass
class LocalWorker:
    instance: ObservedInstance
    imds: ImdsEmulator
    process: asyncio.subprocess.Process
    log_file: Any
    ending: bool = False  # told to stop (terminated in EC2, or reclaimed by the market)


class LocalFleet:
    """With `boot`, each instance first runs its user data (framefleet/instance_boot.py) and
    its worker starts from the settings that writes; without, from the runner's own."""

    def __init__(
        self,
        ec2: Ec2Fleet,
        settings: LocalFleetSettings,
        clock: Clock,
        timeline: Timeline,
        boot: InstanceBoot | None = None,
    ) -> None:
        self._ec2, self.settings, self._clock, self.timeline = ec2, settings, clock, timeline
        self._boot = boot
        self.workers: dict[str, LocalWorker] = {}
        self._started: set[str] = set()  # an instance's process is started once, ever
        self._booting: dict[str, asyncio.Task[None]] = {}
        self._endings: set[asyncio.Task[None]] = set()

    async def run(self, stop: asyncio.Event, on_poll: PollHook | None = None) -> None:
        """Poll EC2 until `stop`; `on_poll` sees the live instances after each poll."""
        try:
            while not stop.is_set():
                try:
                    live = await self.sync()
                    if on_poll is not None:
                        await on_poll(live)
                except FrameFleetError as error:
                    log.warning("fleet poll failed, retrying: %s", error)
                await sleep_unless_stopped(self._clock, stop, self.settings.poll_seconds)
        finally:
            await self.stop_all()

    async def sync(self) -> dict[str, ObservedInstance]:
        """Start a worker for each new instance and end those EC2 no longer lists."""
        live = {i.instance_id: i for i in await self._ec2.describe(self.settings.fleet_id)}
        for instance_id, instance in live.items():
            if instance_id not in self._started and instance.state in ("pending", "running"):
                self._started.add(instance_id)
                self._booting[instance_id] = asyncio.create_task(self._start(instance))
        for instance_id in [i for i in self._booting if i not in live]:
            self._booting.pop(instance_id).cancel()  # gone before its worker started
        for instance_id, worker in list(self.workers.items()):
            if instance_id not in live and not worker.ending:
                self.end(instance_id, "terminated in EC2", kill=False)
            elif worker.process.returncode is not None and not worker.ending:
                worker.ending = True
                self.timeline.write(
                    "worker_exited", worker.instance, returncode=worker.process.returncode
                )
        return live

    async def _start(self, instance: ObservedInstance) -> None:
        try:
            self.workers[instance.instance_id] = await self._started_worker(instance)
        except FrameFleetError as error:
            log.warning("instance %s: no worker: %s", instance.instance_id, error)
            self.timeline.write("worker_failed", instance, why=str(error))
        finally:
            self._booting.pop(instance.instance_id, None)

    async def _started_worker(self, instance: ObservedInstance) -> LocalWorker:
        kind = kind_of(instance.pool.instance_type)
        imds = ImdsEmulator(
            self._clock,
            InstanceIdentity(
                instance_id=instance.instance_id,
                instance_type=instance.pool.instance_type,
                availability_zone=instance.pool.availability_zone,
                lifecycle="spot" if instance.pool.market is Market.SPOT else "on-demand",
            ),
        )
        url = await imds.start()
        folder = self.settings.workdir / instance.instance_id
        folder.mkdir(parents=True, exist_ok=True)
        booted: dict[str, str] = {}
        if self._boot is not None:
            try:
                booted = await self._boot.agent_settings(instance.instance_id, folder, url)
            except BaseException:
                await imds.stop()
                raise
        env = (
            dict(os.environ)
            | self.settings.worker_env
            | booted
            | {
                "FRAMEFLEET_WORKER_IMDS_ENABLED": "true",
                "FRAMEFLEET_WORKER_IMDS_URL": url,
                "FRAMEFLEET_WORKER_CACHE_DIR": str(folder / "cache"),
                # CPU slots that stand for the instance's GPUs, so the scheduler matches jobs to
                # them as it would to the real ones.
                "FRAMEFLEET_WORKER_CPU_SLOTS": str(kind.gpus),
                "FRAMEFLEET_WORKER_CPU_FAMILY": kind.family.value,
                "FRAMEFLEET_WORKER_CPU_VRAM_GIB": str(kind.vram_gib),
            }
        )
        if self.settings.worker_config is not None:
            env["FRAMEFLEET_WORKER_CONFIG"] = str(self.settings.worker_config)
        log_file = (folder / "worker.log").open("ab")
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "framefleet.worker_cli",
            "serve",
            env=env,
            stdout=log_file,
            stderr=log_file,
        )
        log.info(
            "instance %s (%s): worker process %d", instance.instance_id, instance.pool, process.pid
        )
        self.timeline.write("worker_started", instance, pid=process.pid)
        return LocalWorker(instance, imds, process, log_file)

    def end(self, instance_id: str, why: str, *, kill: bool) -> None:
        """End an instance's process: at once (`kill`, the market took the machine) or with a
        grace period for the agent to checkpoint (a shutdown)."""
        worker = self.workers.get(instance_id)
        if worker is None or worker.ending:
            return
        worker.ending = True
        self.timeline.write("worker_killed" if kill else "worker_stopped", worker.instance, why=why)
        task = asyncio.create_task(self._end(worker, kill))
        self._endings.add(task)
        task.add_done_callback(self._endings.discard)

    async def _end(self, worker: LocalWorker, kill: bool) -> None:
        process = worker.process
        if process.returncode is None:
            process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                async with asyncio.timeout(self.settings.stop_grace_seconds):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()
        await worker.imds.stop()
        worker.log_file.close()

    async def stop_all(self) -> None:
        for booting in list(self._booting.values()):
            booting.cancel()
        for instance_id in list(self.workers):
            self.end(instance_id, "the fleet runner stops", kill=False)
        if self._endings:
            await asyncio.gather(*self._endings, return_exceptions=True)
