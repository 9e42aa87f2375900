"""Secrets Manager's PutSecretValue: the first API token of a deployment is written into the
secret Terraform made for it (`framefleet tokens create --into-secret`), never printed into a
task's log."""

from __future__ import annotations

from typing import Any

from kernel.aws_errors import translated


class SecretWriter:
    def __init__(self, secrets: Any) -> None:  # a boto3 Secrets Manager client (no stubs)
        self._secrets = secrets

    def put(self, secret_id: str, value: str) -> None:
        with translated("PutSecretValue"):
            self._secrets.put_secret_value(SecretId=secret_id, SecretString=value)
