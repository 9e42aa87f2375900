"""What the credential issuer needs, declared by it: the broker's worker accounts and the drop
the instance reads its password from."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Protocol

from kernel.errors import FrameFleetError


class CredentialError(FrameFleetError):
    """The broker or the parameter store refused or did not answer; the next round retries."""


class BrokerAccounts(Protocol):
    async def accounts(self) -> set[str]:
        """The worker ids (instance ids) that hold an account now."""
        ...

    async def ensure_control_plane(self, password: str) -> None:
        """The control plane's account: every worker's reports, every worker's commands."""
        ...

    async def apply(self, grant: Mapping[str, str], revoke: Collection[str]) -> None:
        """Create each granted account (worker id -> password) with access to that worker's
        own topics only; delete each revoked one. Idempotent."""
        ...


class CredentialDrop(Protocol):
    async def read(self, worker_id: str) -> str | None:
        """The password already handed to that instance, if any."""
        ...

    async def write(self, worker_id: str, password: str) -> None:
        """Hand the password to that instance, readable by it alone."""
        ...

    async def delete(self, worker_id: str) -> None:
        """Idempotent: a missing one is not an error."""
        ...
