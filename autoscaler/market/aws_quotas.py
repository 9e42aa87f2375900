"""The account's vCPU quotas from Service Quotas (aioboto3), behind `limits.QuotaSource`.

A quota the account never had changed may have no applied value (NoSuchResourceException):
its AWS default is read instead. Thin: boto stays here, its errors leave typed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel.aws_errors import translated
from kernel.errors import NotFound
from kernel.service_quotas import VcpuQuota

if TYPE_CHECKING:
    from types_aiobotocore_service_quotas.client import ServiceQuotasClient


class ServiceQuotasReader:
    def __init__(self, client: ServiceQuotasClient) -> None:
        self._client = client

    async def vcpu_quota(self, quota: VcpuQuota) -> float | None:
        try:
            with translated("GetServiceQuota"):
                applied = await self._client.get_service_quota(
                    ServiceCode="ec2", QuotaCode=quota.code
                )
            return float(applied["Quota"]["Value"])
        except NotFound:
            pass
        try:
            with translated("GetAWSDefaultServiceQuota"):
                default = await self._client.get_aws_default_service_quota(
                    ServiceCode="ec2", QuotaCode=quota.code
                )
        except NotFound:
            return None
        return float(default["Quota"]["Value"])
