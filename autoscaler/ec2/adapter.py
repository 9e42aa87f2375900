"""EC2 through aioboto3: CreateFleet (type instant) with launch-template overrides across types
and AZs, RunInstances for a single pool, TerminateInstances, and instances found by tag."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from autoscaler.ec2.ports import (
    FLEET_TAG,
    MARKET_TAG,
    REASON_TAG,
    CapacityUnavailable,
    LaunchRequest,
    LaunchResult,
    LimitReached,
    ObservedInstance,
)
from autoscaler.pools import Pool
from kernel.aws_errors import (
    UNREACHABLE,
    AwsFault,
    classify,
    error_code,
    to_typed_error,
    translated,
)
from kernel.errors import AwsError, AwsUnavailable
from kernel.instance_types import kind_of
from kernel.market import Market

if TYPE_CHECKING:
    from types_aiobotocore_ec2.client import EC2Client

log = logging.getLogger(__name__)

LIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]


def _tags(request: LaunchRequest) -> list[dict[str, str]]:
    tags = {
        FLEET_TAG: request.fleet_id,
        MARKET_TAG: request.market.value,
        REASON_TAG: request.reason[:255],  # EC2's tag value limit
        "Name": f"framefleet-{request.fleet_id}",
    }
    return [{"Key": key, "Value": value} for key, value in tags.items()]


class Ec2FleetAdapter:
    def __init__(
        self,
        ec2: EC2Client,
        launch_template: str,
        use_create_fleet: bool = True,
        subnets: Mapping[str, str] | None = None,
        family_templates: Mapping[str, str] | None = None,
    ):
        self._ec2 = ec2
        self._template = launch_template
        # GPU family -> its own launch template (an image with that family's driver); the
        # families left out launch from `launch_template`.
        self._family_templates = dict(family_templates or {})
        self._create_fleet = use_create_fleet
        # Zone -> the VPC subnet to launch into there; a zone without one is named as a zone
        # (the default VPC).
        self._subnets = dict(subnets or {})

    def template_for(self, pool: Pool) -> str:
        family = kind_of(pool.instance_type).family.value
        return self._family_templates.get(family, self._template)

    def _where(self, pool: Pool) -> dict[str, str]:
        subnet = self._subnets.get(pool.availability_zone)
        return {"SubnetId": subnet} if subnet else {"AvailabilityZone": pool.availability_zone}

    async def ensure_launch_template(self, image_id: str, user_data_b64: str = "") -> str:
        """The worker launch template (created once; its id is returned)."""
        with translated("DescribeLaunchTemplates"):
            found = await self._ec2.describe_launch_templates(
                Filters=[{"Name": "launch-template-name", "Values": [self._template]}]
            )
        templates = found.get("LaunchTemplates", [])
        if templates:
            return templates[0]["LaunchTemplateId"]
        data: dict[str, Any] = {"ImageId": image_id}
        if user_data_b64:
            data["UserData"] = user_data_b64
        with translated("CreateLaunchTemplate"):
            query: dict[str, Any] = {
                "LaunchTemplateName": self._template,
                "LaunchTemplateData": data,
            }
            created = await self._ec2.create_launch_template(**query)
        return created["LaunchTemplate"]["LaunchTemplateId"]

    async def launch(self, request: LaunchRequest) -> LaunchResult:
        if self._create_fleet:
            return await self._fleet(request)
        return await self._run_instances(request)

    async def _fleet(self, request: LaunchRequest) -> LaunchResult:
        spot = request.market is Market.SPOT
        # Plain dicts: the stubs type InstanceType as a closed literal of every type name.
        query: dict[str, Any] = {
            "Type": "instant",
            "ClientToken": request.client_token,
            "TargetCapacitySpecification": {
                "TotalTargetCapacity": request.count,
                "DefaultTargetCapacityType": "spot" if spot else "on-demand",
            },
            "SpotOptions": {"AllocationStrategy": "price-capacity-optimized"},
            "OnDemandOptions": {"AllocationStrategy": "lowest-price"},
            # One config per launch template: each pool's overrides under its family's.
            "LaunchTemplateConfigs": [
                {
                    "LaunchTemplateSpecification": {
                        "LaunchTemplateName": template,
                        "Version": "$Latest",
                    },
                    "Overrides": [
                        {"InstanceType": p.instance_type} | self._where(p)
                        for p in request.pools
                        if self.template_for(p) == template
                    ],
                }
                for template in dict.fromkeys(self.template_for(p) for p in request.pools)
            ],
            "TagSpecifications": [{"ResourceType": "instance", "Tags": _tags(request)}],
        }
        try:
            response = await self._ec2.create_fleet(**query)
        except ClientError as failure:  # the whole request refused: every pool of it, alike
            refused = _refusal(failure, request.pools)
            if refused is None:
                raise to_typed_error("CreateFleet", failure) from None
            return refused
        except UNREACHABLE as failure:
            raise AwsUnavailable(f"CreateFleet: {failure}") from None
        errors, limits, others = fleet_errors(response.get("Errors", []), request, self._subnets)
        ids = [i for group in response.get("Instances", []) for i in group.get("InstanceIds", [])]
        if others and not ids and not errors and not limits:
            raise AwsError("CreateFleet: " + "; ".join(others))
        for other in others:
            log.warning("CreateFleet: %s", other)
        instances = await self._describe_ids(ids) if ids else []
        return LaunchResult(tuple(instances), tuple(errors), tuple(limits))

    async def _run_instances(self, request: LaunchRequest) -> LaunchResult:
        """One pool at a time, first that works: for accounts without CreateFleet."""
        errors: list[CapacityUnavailable] = []
        limits: list[LimitReached] = []
        for pool in request.pools:
            if any(limit.scope.covers(*_where_what(pool)) for limit in limits):
                continue  # the limit just met holds this pool back too
            query: dict[str, Any] = {
                "LaunchTemplate": {
                    "LaunchTemplateName": self.template_for(pool),
                    "Version": "$Latest",
                },
                "InstanceType": pool.instance_type,
                "MinCount": request.count,
                "MaxCount": request.count,
                "ClientToken": f"{request.client_token}-{pool}"[:64],
                "TagSpecifications": [{"ResourceType": "instance", "Tags": _tags(request)}],
            }
            where = self._where(pool)
            if "SubnetId" in where:
                query["SubnetId"] = where["SubnetId"]
            else:
                query["Placement"] = where
            if pool.market is Market.SPOT:
                query["InstanceMarketOptions"] = {
                    "MarketType": "spot",
                    "SpotOptions": {"SpotInstanceType": "one-time"},
                }
            try:
                response = await self._ec2.run_instances(**query)
            except ClientError as error:
                refused = _refusal(error, (pool,))
                if refused is None:
                    raise to_typed_error("RunInstances", error) from None
                errors.extend(refused.errors)
                limits.extend(refused.limits)
                continue
            except UNREACHABLE as failure:
                raise AwsUnavailable(f"RunInstances: {failure}") from None
            ids = [i["InstanceId"] for i in response.get("Instances", [])]
            instances = tuple(await self._describe_ids(ids))
            return LaunchResult(instances, tuple(errors), tuple(limits))
        return LaunchResult((), tuple(errors), tuple(limits))

    async def terminate(self, instance_ids: Sequence[str]) -> None:
        if not instance_ids:
            return
        with translated("TerminateInstances"):
            await self._ec2.terminate_instances(InstanceIds=list(instance_ids))

    async def describe(self, fleet_id: str) -> list[ObservedInstance]:
        return await self._query(
            Filters=[
                {"Name": f"tag:{FLEET_TAG}", "Values": [fleet_id]},
                {"Name": "instance-state-name", "Values": LIVE_STATES},
            ]
        )

    async def _describe_ids(self, instance_ids: Sequence[str]) -> list[ObservedInstance]:
        return await self._query(InstanceIds=list(instance_ids))

    async def _query(self, **query: Any) -> list[ObservedInstance]:
        found = []
        with translated("DescribeInstances"):
            async for page in self._ec2.get_paginator("describe_instances").paginate(**query):
                for reservation in page.get("Reservations", []):
                    for item in reservation.get("Instances", []):
                        found.append(observed_instance(item))
        return found


FleetErrors = tuple[list[CapacityUnavailable], list[LimitReached], list[str]]


def fleet_errors(
    found: Sequence[Any], request: LaunchRequest, subnets: Mapping[str, str]
) -> FleetErrors:
    """CreateFleet's `Errors`, sorted: a pool short of capacity, a limit of the account's
    (its scope: a quota, a subnet), and the rest (not the pool's fault: holding the pool back
    would hide the real problem)."""
    zone_of_subnet = {subnet: zone for zone, subnet in subnets.items()}
    errors, limits, others = [], [], []
    for error in found:
        override = error.get("LaunchTemplateAndOverrides", {}).get("Overrides", {})
        zone = override.get("AvailabilityZone") or zone_of_subnet.get(
            str(override.get("SubnetId", "")), request.pools[0].availability_zone
        )
        pool = Pool(
            str(override.get("InstanceType", request.pools[0].instance_type)),
            str(zone),
            request.market,
        )
        code, message = str(error.get("ErrorCode", "")), str(error.get("ErrorMessage", ""))
        fault = classify(code)
        if fault is AwsFault.CAPACITY:
            errors.append(CapacityUnavailable(pool, code, message))
        elif fault is AwsFault.LIMIT:
            limits.append(LimitReached(pool, code, message))
        else:
            others.append(f"{pool}: {code}: {message}")
    return errors, limits, others


def _where_what(pool: Pool) -> tuple[str, str, Market]:
    return pool.instance_type, pool.availability_zone, pool.market


def _refusal(error: ClientError, pools: Sequence[Pool]) -> LaunchResult | None:
    """A launch call refused for capacity or an account limit, as a result naming the pools
    it refused; None for any other error (raised as a typed error)."""
    code = error_code(error)
    message = str(error.response.get("Error", {}).get("Message", ""))
    fault = classify(code)
    if fault is AwsFault.CAPACITY:
        return LaunchResult((), tuple(CapacityUnavailable(p, code, message) for p in pools))
    if fault is AwsFault.LIMIT:
        return LaunchResult((), (), tuple(LimitReached(p, code, message) for p in pools))
    return None


def observed_instance(item: Any) -> ObservedInstance:
    tags = {t["Key"]: t["Value"] for t in item.get("Tags", [])}
    spot = item.get("InstanceLifecycle") == "spot" or tags.get(MARKET_TAG) == "spot"
    launched = item["LaunchTime"]
    return ObservedInstance(
        item["InstanceId"],
        Pool(
            item["InstanceType"],
            item.get("Placement", {}).get("AvailabilityZone", ""),
            Market.SPOT if spot else Market.ON_DEMAND,
        ),
        item.get("State", {}).get("Name", "pending"),
        launched if launched.tzinfo else launched.replace(tzinfo=UTC),
        tags,
    )
