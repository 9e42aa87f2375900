"""The autoscaler's instance catalogue at start: EC2's DescribeInstanceTypes for the candidate
types, kept in the store for the control plane (which vets workers' hellos by it) and for a
start when EC2 does not answer; the shipped table (`kernel.instance_types`) is the last
resort. An operator may so name any GPU type of a known family in `candidate_types`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from autoscaler.ec2.instance_kinds import describe_gpu_types
from kernel.errors import AwsError, ConfigurationError
from kernel.instance_types import CATALOG, learn
from orchestrator.store.instance_kinds import InstanceKindBook

if TYPE_CHECKING:
    from types_aiobotocore_ec2.client import EC2Client

log = logging.getLogger(__name__)


async def learn_candidate_types(
    ec2: EC2Client, book: InstanceKindBook, names: Sequence[str]
) -> None:
    """Describe `names` by EC2 (else by the store's copy) into the catalogue; a name none of
    them nor the shipped table knows as a GPU type is a configuration error."""
    refused: dict[str, str] = {}
    try:
        kinds, refused = await describe_gpu_types(ec2, names)
    except AwsError as error:
        log.warning("EC2 did not describe the instance types (%s): the store's copy is used", error)
        learn(await asyncio.to_thread(book.kinds))
    else:
        await asyncio.to_thread(book.record_kinds, kinds)
        learn(kinds)
    unknown = [name for name in names if name not in CATALOG]
    if unknown:
        why = "; ".join(f"{name}: {refused.get(name, 'not described')}" for name in unknown)
        raise ConfigurationError(f"autoscaler.candidate_types names no GPU type here: {why}")
