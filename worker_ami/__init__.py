"""Everything the GPU worker image holds: the agent package, Packer template, systemd unit."""
