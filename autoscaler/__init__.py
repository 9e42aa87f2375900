"""FrameFleet autoscaler: market data, demand forecast, purchase policy, EC2 actuation."""
