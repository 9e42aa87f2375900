"""The password drop in SSM Parameter Store (thin): `<path>/<instance-id>`, a SecureString
tagged with the instance's ARN. The workers' IAM policy lets an instance read a parameter
under the path only when that tag equals its own ARN (`ec2:SourceInstanceARN`), so no
instance can read another's password."""

from __future__ import annotations

from typing import Any

from kernel.aws_errors import translated
from kernel.errors import NotFound

INSTANCE_TAG = "framefleet-instance"


class SsmCredentialDrop:
    def __init__(self, ssm: Any, sts: Any, path: str = "/framefleet/workers") -> None:
        self._ssm, self._sts, self._path = ssm, sts, path.rstrip("/")
        self._arn_prefix: str | None = None

    def name(self, worker_id: str) -> str:
        return f"{self._path}/{worker_id}"

    async def instance_arn(self, worker_id: str) -> str:
        """The account and partition come from GetCallerIdentity, which needs no grant."""
        if self._arn_prefix is None:
            with translated("GetCallerIdentity"):
                identity = await self._sts.get_caller_identity()
            partition = str(identity["Arn"]).split(":")[1]
            region = self._ssm.meta.region_name
            self._arn_prefix = f"arn:{partition}:ec2:{region}:{identity['Account']}:instance/"
        return self._arn_prefix + worker_id

    async def read(self, worker_id: str) -> str | None:
        try:
            with translated("GetParameter"):
                answer = await self._ssm.get_parameter(
                    Name=self.name(worker_id), WithDecryption=True
                )
        except NotFound:
            return None
        return str(answer["Parameter"]["Value"])

    async def write(self, worker_id: str, password: str) -> None:
        arn = await self.instance_arn(worker_id)
        with translated("PutParameter"):
            await self._ssm.put_parameter(
                Name=self.name(worker_id),
                Value=password,
                Type="SecureString",
                Tier="Standard",
                Tags=[{"Key": INSTANCE_TAG, "Value": arn}],
                Description="FrameFleet worker broker password (autoscaler-issued)",
            )

    async def delete(self, worker_id: str) -> None:
        try:
            with translated("DeleteParameter"):
                await self._ssm.delete_parameter(Name=self.name(worker_id))
        except NotFound:
            pass  # revoked already
