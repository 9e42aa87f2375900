"""Thin AWS adapters (aioboto3). botocore exceptions never leave this package."""
