# Builds the FrameFleet GPU worker AMI on AWS's Deep Learning Base OSS NVIDIA Driver AMI
# (Ubuntu 24.04: the NVIDIA driver and CUDA are there already): Python 3.11 from the deadsnakes
# archive (Ubuntu 24.04 ships 3.12; the agent is built and tested on 3.11), the agent in a
# virtualenv with its CUDA torch, its systemd units, and optionally a warm model cache.
#   python -m build --wheel
#   packer init worker_ami/packer && packer build -var region=us-east-1 worker_ami/packer
# (The plugin requirement is in plugins.pkr.hcl, so this file alone also validates with
# Packer 1.6, whose amazon-ebs builder is built in: `packer validate -syntax-only` in the tests.)

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "instance_type" {
  type        = string
  default     = "g6.xlarge"
  description = "A GPU instance, so the driver is installed and checked on real hardware"
}

variable "framefleet_wheel" {
  type        = string
  default     = "dist/framefleet-0.1.0-py3-none-any.whl"
  description = "The agent's wheel, built with `python -m build` before packer runs"
}

variable "warm_models" {
  type        = string
  default     = ""
  description = "Space-separated model names to pre-fetch into the cache (needs the registry)"
}

source "amazon-ebs" "worker" {
  region        = var.region
  instance_type = var.instance_type
  ami_name      = "framefleet-worker-{{timestamp}}"
  ssh_username  = "ubuntu"
  # IMDSv2 only, hop limit 2 (the agent may run in a container).
  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 2
  }
  source_ami_filter {
    filters = {
      name                = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04) *"
      architecture        = "x86_64"
      virtualization-type = "hvm"
      root-device-type    = "ebs"
    }
    owners      = ["amazon"]
    most_recent = true
  }
  launch_block_device_mappings {
    device_name           = "/dev/sda1"
    volume_size           = 200
    volume_type           = "gp3"
    encrypted             = true
    delete_on_termination = true
  }
  tags = {
    Name       = "framefleet-worker"
    framefleet = "worker-ami"
  }
}

build {
  sources = ["source.amazon-ebs.worker"]

  # The wheel keeps its own file name: pip reads the version and tags from it and refuses a
  # wheel named otherwise.
  provisioner "file" {
    source      = var.framefleet_wheel
    destination = "/tmp/${basename(var.framefleet_wheel)}"
  }

  provisioner "file" {
    source      = "worker_ami/systemd/"
    destination = "/tmp/framefleet-units"
  }

  provisioner "shell" {
    script           = "worker_ami/packer/provision.sh"
    environment_vars = ["WARM_MODELS=${var.warm_models}", "FRAMEFLEET_WHEEL=/tmp/${basename(var.framefleet_wheel)}"]
    execute_command  = "sudo -E bash '{{ .Path }}'"
  }
}
