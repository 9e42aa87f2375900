"""Level-triggered worker credentials: every round, each instance EC2 lists holds a broker
account of its own, and no account outlives its instance.

Why level-triggered: a crash between a launch and its grant, or between a revoke's two steps,
is repaired by the next round, since each round compares what is with what should be. The
password goes to the drop before the broker, and a grant reuses a password already dropped, so
an instance that read its password never finds the broker expecting another. A revoke deletes
the drop first, so an account without a drop (a revoke cut short) is still listed and revoked
again. An account issued moments ago is kept a while even if EC2 does not list its instance yet
(DescribeInstances is eventually consistent)."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from autoscaler.credentials.ports import BrokerAccounts, CredentialDrop
from kernel.clock import Clock

log = logging.getLogger(__name__)


def new_password() -> str:
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class CredentialChanges:
    granted: tuple[str, ...] = ()
    revoked: tuple[str, ...] = ()


@dataclass
class WorkerCredentials:
    broker: BrokerAccounts
    drop: CredentialDrop
    clock: Clock
    grace: timedelta = timedelta(minutes=5)
    password: Callable[[], str] = new_password
    # The control plane's broker password, set on its account once per process (None: the
    # control plane's account is managed elsewhere).
    control_plane_password: str | None = None
    control_plane_ready: bool = False
    issued_at: dict[str, datetime] = field(default_factory=dict)

    async def sync(self, listed: Collection[str]) -> CredentialChanges:
        """Grant the listed instances without an account, revoke the accounts of instances
        no longer listed (after the grace period for ones issued by this process)."""
        now = self.clock.now()
        if self.control_plane_password is not None and not self.control_plane_ready:
            await self.broker.ensure_control_plane(self.control_plane_password)
            self.control_plane_ready = True
        holders = await self.broker.accounts()
        wanted = set(listed)
        grant = {}
        for worker_id in sorted(wanted - holders):
            password = await self.drop.read(worker_id)
            if password is None:
                password = self.password()
                await self.drop.write(worker_id, password)
            grant[worker_id] = password
        revoke = sorted(
            worker_id
            for worker_id in holders - wanted
            if now - self.issued_at.get(worker_id, now - self.grace) >= self.grace
        )
        for worker_id in revoke:
            await self.drop.delete(worker_id)
        if grant or revoke:
            await self.broker.apply(grant, revoke)
        for worker_id in grant:
            self.issued_at[worker_id] = now
            log.info("broker account issued to %s", worker_id)
        for worker_id in revoke:
            self.issued_at.pop(worker_id, None)
            log.info("broker account of %s revoked: EC2 no longer lists it", worker_id)
        return CredentialChanges(tuple(grant), tuple(revoke))
