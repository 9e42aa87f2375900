"""The ground floor every part of FrameFleet speaks: the job and worker protocols, job states
and records, the clock, typed errors, settings support, the MQTT link, the table of AWS error
codes, and outside text made safe to print. It imports nothing of FrameFleet's above it."""
