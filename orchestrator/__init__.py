"""FrameFleet control plane: job protocol, durable store, SQS intake, CLI."""
