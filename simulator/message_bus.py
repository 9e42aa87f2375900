"""What MQTT carries between simulated workers and the control plane, in memory: each worker's
messages wait in an outbox until delivered; the control plane's commands (kept by its
MemoryLink) go to their workers, whose answers are delivered in turn."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from kernel.worker_protocol import parse_topic
from orchestrator.control.service import ControlPlaneService
from simulator.fakes import MemoryLink
from simulator.workers import SimulatedWorker

COMMAND_ROUNDS = 4  # command -> answer -> command ... within one moment


class MessageBus:
    def __init__(self, control: ControlPlaneService, link: MemoryLink) -> None:
        self._control, self._link = control, link
        self._outbox: list[tuple[str, str]] = []

    async def report(self, workers: Mapping[str, SimulatedWorker], now: datetime) -> None:
        """Each booted worker says hello (once) and beats its heart; delivered."""
        for worker in workers.values():
            if not worker.said_hello and worker.instance.ready_at <= now:
                worker.hello(now)
            if worker.said_hello:
                worker.heartbeat(now)
        await self.deliver()

    def send(self, topic_name: str, payload: str) -> None:
        """A worker publishes (on a topic the protocol knows)."""
        parse_topic(topic_name)
        self._outbox.append((topic_name, payload))

    async def deliver(self) -> None:
        outbox, self._outbox = self._outbox, []
        for topic_name, payload in outbox:
            await self._control.on_message(topic_name, payload.encode())
        await self._control.apply_pending()

    async def commands(self, workers: Mapping[str, SimulatedWorker], now: datetime) -> None:
        """The control plane's commands to their workers, and the workers' answers back."""
        for _ in range(COMMAND_ROUNDS):
            if not self._link.commands:
                return
            commands, self._link.commands = self._link.commands, []
            for command in commands:
                addressee = workers.get(command.worker_id)
                if addressee is not None:
                    addressee.on_command(command, now)
            await self.deliver()
