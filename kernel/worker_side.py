"""The worker's side of the protocol, written once for every worker that speaks it: the agent,
the simulator's workers and the benchmarks' workers. It builds what a worker publishes (its
hello and status, retained; heartbeats in sequence; events with their ids) and keeps the recent
outcomes every heartbeat repeats, so a lost event is never a lost outcome. Sending is the
caller's: a link, a queue in memory, a simulation."""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from kernel.market import Market
from kernel.worker_protocol import (
    Channel,
    EventKind,
    GpuHealth,
    GpuInfo,
    Heartbeat,
    Hello,
    JobProgress,
    Status,
    WarmModel,
    WorkerEvent,
    topic,
)

RECENT_OUTCOMES = 32  # repeated in every heartbeat


@dataclass(frozen=True)
class Outgoing:
    """One message to publish: where, what (JSON), and whether the broker keeps it."""

    topic: str
    payload: str
    retain: bool = False


@dataclass(frozen=True)
class Machine:
    """What a hello says of the machine a worker runs on."""

    instance_id: str | None  # None: no EC2 instance (a workstation)
    instance_type: str
    availability_zone: str
    market: Market
    gpus: tuple[GpuInfo, ...]
    agent_version: str


def random_event_id() -> str:
    return str(uuid.uuid4())


class WorkerSide:
    def __init__(
        self,
        worker_id: str,
        recent_outcomes: int = RECENT_OUTCOMES,
        event_ids: Callable[[], str] = random_event_id,
    ) -> None:
        self.worker_id = worker_id
        self.recent: deque[WorkerEvent] = deque(maxlen=recent_outcomes)
        self._event_ids = event_ids
        self._sequence = 0

    def hello(self, at: datetime, machine: Machine) -> Outgoing:
        """Retained: a control plane that (re)connects later still learns of this worker."""
        hello = Hello(
            worker_id=self.worker_id,
            sent_at=at,
            instance_id=machine.instance_id,
            instance_type=machine.instance_type,
            availability_zone=machine.availability_zone,
            market=machine.market,
            gpus=machine.gpus,
            agent_version=machine.agent_version,
        )
        return self._out(Channel.HELLO, hello, retain=True)

    def status(self, at: datetime, online: bool) -> Outgoing:
        """Online when it connects; offline is its last will (the broker publishes it)."""
        status = Status(worker_id=self.worker_id, sent_at=at, online=online)
        return self._out(Channel.STATUS, status, retain=True)

    def heartbeat(
        self,
        at: datetime,
        jobs: Iterable[JobProgress] = (),
        gpus: Iterable[GpuHealth] = (),
        warm_models: Iterable[WarmModel] = (),
        accepting: bool = True,
    ) -> Outgoing:
        """The next in sequence, with the recent outcomes."""
        self._sequence += 1
        beat = Heartbeat(
            worker_id=self.worker_id,
            sent_at=at,
            sequence=self._sequence,
            jobs=tuple(jobs),
            gpus=tuple(gpus),
            warm_models=tuple(warm_models),
            recent=tuple(self.recent),
            accepting=accepting,
        )
        return self._out(Channel.HEARTBEAT, beat)

    def event(
        self, at: datetime, kind: EventKind, **fields: object
    ) -> tuple[WorkerEvent, Outgoing]:
        """An event with a fresh id."""
        event = WorkerEvent.model_validate(
            {
                "worker_id": self.worker_id,
                "sent_at": at,
                "event_id": self._event_ids(),
                "kind": kind,
                **fields,
            }
        )
        return event, self._out(Channel.EVENTS, event)

    def outcome(
        self, at: datetime, kind: EventKind, **fields: object
    ) -> tuple[WorkerEvent, Outgoing]:
        """How an attempt ended: an event that the heartbeats after it repeat too."""
        event, message = self.event(at, kind, **fields)
        self.recent.append(event)
        return event, message

    def _out(
        self,
        channel: Channel,
        message: Hello | Status | Heartbeat | WorkerEvent,
        retain: bool = False,
    ) -> Outgoing:
        return Outgoing(topic(self.worker_id, channel), message.model_dump_json(), retain)
