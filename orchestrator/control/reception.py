"""Worker messages in: the sender's budget first, then the protocol, identity and admission.

Order matters under a flood: the budget (`budgets`) costs a topic split and a bucket, so a
worker that floods is dropped before its bytes are parsed; the healthy workers' messages behind
it are read at once, and their heartbeats noted in the registry as they arrive (`admit`), so a
flood never makes a healthy worker look lost. What touches jobs waits in a bounded inbox for
the service to write in batches; past its bound, events are dropped and counted (workers repeat
their outcomes in every heartbeat, so nothing is lost for good).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any

from kernel.clock import Clock
from kernel.instance_types import CATALOG, learn
from kernel.worker_protocol import (
    TOPIC_PREFIX,
    WORKER_PUBLISHES,
    Channel,
    Hello,
    ProtocolError,
    decode_worker_message,
    parse_topic,
    topic,
)
from orchestrator.control.admission import Inbound, Refused, admit
from orchestrator.control.budgets import BudgetVerdict, MessageBudget, SenderBudgets
from orchestrator.control.identity import UNLISTED, KnownInstance, reported_memory, vet_hello
from orchestrator.control.refusals import RefusedMessages
from orchestrator.control.settings import ControlStats, InstanceFacts
from orchestrator.scheduling.registry import WorkerRegistry

log = logging.getLogger(__name__)
MAX_UNLISTED = 10_000  # hellos of instances not yet listed, kept to try again (oldest dropped)
INBOX_BOUND = 50_000  # job events waiting to be written (a few seconds of a large fleet)
UNKNOWN_SENDER = "?"  # a topic with no worker id: one budget for all of them

WORKER_TOPICS = [f"{TOPIC_PREFIX}/+/{channel.value}" for channel in WORKER_PUBLISHES]

Quarantine = Callable[[str], Coroutine[Any, Any, None]]


class Reception:
    def __init__(
        self,
        registry: WorkerRegistry,
        refusals: RefusedMessages,
        instances: InstanceFacts,
        stats: ControlStats,
        clock: Clock,
        *,
        budget: MessageBudget,
        workers_off_ec2: bool,
        running: Callable[[], dict[str, int]],
        quarantine: Quarantine,
    ) -> None:
        """`running`: job -> attempt known to run (see `admit`); `quarantine`: what is done
        to a worker found flooding (the service drains its instance)."""
        self._registry = registry
        self._refusals = refusals
        self._instances = instances
        self._stats = stats
        self._budgets = SenderBudgets(clock, budget)
        self._workers_off_ec2 = workers_off_ec2
        self._running = running
        self._quarantine = quarantine
        self.inbox: asyncio.Queue[Inbound] = asyncio.Queue(INBOX_BOUND)
        self._quarantining: set[asyncio.Task[None]] = set()
        # worker -> its last hello, while its instance is not listed: read again each round,
        # since the broker hands a retained hello over only once.
        self._unlisted: OrderedDict[str, tuple[str, bytes]] = OrderedDict()

    def remembered(self) -> int:
        return self._budgets.remembered()

    def forget_idle(self) -> None:
        self._budgets.forget_idle()

    def quarantined(self) -> list[str]:
        return self._budgets.quarantined()

    async def on_message(self, topic_name: str, payload: bytes) -> None:
        if self.admit(topic_name):
            await self.deliver(topic_name, payload)

    def admit(self, topic_name: str) -> bool:
        """The sender's budget, before anything is parsed or queued (the link asks as each
        message arrives): past it the message is dropped and counted."""
        try:
            sender, channel = parse_topic(topic_name)
        except ProtocolError:
            sender, channel = UNKNOWN_SENDER, None
        verdict = self._budgets.take(sender)
        if verdict is BudgetVerdict.ALLOWED:
            return True
        if verdict is BudgetVerdict.QUARANTINED and channel is not Channel.HELLO:
            return True  # read; but a hello would bring it back to work before its time
        self._refusals.drop(verdict.value, sender)
        if verdict is BudgetVerdict.FLOODING and sender != UNKNOWN_SENDER:
            log.warning("worker %s floods the control plane: quarantined", sender)
            task = asyncio.get_running_loop().create_task(self._quarantine(sender))
            self._quarantining.add(task)
            task.add_done_callback(self._quarantining.discard)
        return False

    async def deliver(self, topic_name: str, payload: bytes) -> None:
        """A message within its sender's budget: the protocol, identity and admission."""
        try:
            message = decode_worker_message(topic_name, payload)
        except ProtocolError as error:
            self._stats.ignored_messages += 1
            self._refusals.refuse("malformed", topic_name, str(error), payload)
            return
        if isinstance(message, Hello):
            vetted = await self._vet(message)
            if isinstance(vetted, Refused):
                self._hold_if_unlisted(message.worker_id, vetted, topic_name, payload)
                key = f"{message.worker_id}:{message.sent_at.isoformat()}"
                self._refusals.refuse(vetted.reason, topic_name, vetted.error, payload, key)
                return
            self._unlisted.pop(message.worker_id, None)
            message = vetted
        admitted, refused = admit(message, self._registry, self._running())
        if refused is not None:
            self._refusals.refuse(refused.reason, topic_name, refused.error, payload, refused.key)
        for item in admitted:
            try:
                self.inbox.put_nowait(item)
            except asyncio.QueueFull:
                self._refusals.drop("inbox_full", message.worker_id)

    def _hold_if_unlisted(
        self, worker_id: str, refused: Refused, topic_name: str, payload: bytes
    ) -> None:
        if refused.reason != UNLISTED:
            return
        self._unlisted[worker_id] = (topic_name, payload)
        self._unlisted.move_to_end(worker_id)
        while len(self._unlisted) > MAX_UNLISTED:
            self._unlisted.popitem(last=False)

    async def admit_listed(self) -> None:
        """The held hellos again (each round): those whose instance is listed now are
        delivered (and vetted) as they came; the others wait, their refusal counted once.
        One query a round for all of them, however many are held."""
        if not self._unlisted:
            return
        listed = await asyncio.to_thread(self._instances.listed_among, list(self._unlisted))
        for worker_id in [w for w in self._unlisted if w in listed]:
            topic_name, payload = self._unlisted.pop(worker_id)
            await self.deliver(topic_name, payload)

    async def _vet(self, hello: Hello) -> Hello | Refused:
        """The hello as its credentials and EC2 have it (see `identity`); a claim beyond them
        is counted and logged, and the worker is believed only as far as they go."""
        launched = None
        if hello.instance_id == hello.worker_id:
            launched = await asyncio.to_thread(self._instances.launched_as, hello.worker_id)
        known = KnownInstance(*launched) if launched else None
        if known is not None and known.instance_type not in CATALOG:
            # A type the operator named, that the autoscaler described after this started.
            learn(await asyncio.to_thread(self._instances.described_kinds))
        vetted = vet_hello(hello, known, self._workers_off_ec2)
        if isinstance(vetted, Refused):
            return vetted
        kind = CATALOG.get(known.instance_type) if known is not None else None
        reported = reported_memory(vetted.hello, kind) if kind is not None else None
        if kind is not None and reported is not None:
            learn([replace(kind, vram_gib=reported)])
            await asyncio.to_thread(self._instances.lower_memory, kind, reported)
        if vetted.clamped:
            claims = "; ".join(vetted.clamped)
            where = topic(hello.worker_id, Channel.HELLO)
            key = f"{hello.worker_id}:{hello.sent_at.isoformat()}"
            body = hello.model_dump_json().encode()
            self._refusals.refuse("hardware_clamped", where, f"claimed {claims}", body, key)
        return vetted.hello
