"""Spot interruptions: EventBridge events (via SQS) and the workers' own IMDS reports."""
