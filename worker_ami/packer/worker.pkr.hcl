# Builds the FrameFleet GPU worker AMI: NVIDIA driver, the agent in a virtualenv with its systemd
# unit, and optionally a warm model cache so the first job on a new instance skips the download.
#   packer init worker_ami/packer && packer build -var region=us-east-1 worker_ami/packer
packer {
  required_plugins {
    amazon = {
      source  = "github.com/hashicorp/amazon"
      version = ">= 1.3.0"
    }
  }
}

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
      name                = "ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-*"
      virtualization-type = "hvm"
      root-device-type    = "ebs"
    }
    owners      = ["099720109477"]
    most_recent = true
  }
  launch_block_device_mappings {
    device_name           = "/dev/sda1"
    volume_size           = 200
    volume_type           = "gp3"
    delete_on_termination = true
  }
  tags = {
    Name      = "framefleet-worker"
    framefleet = "worker-ami"
  }
}

build {
  sources = ["source.amazon-ebs.worker"]

  provisioner "file" {
    source      = var.framefleet_wheel
    destination = "/tmp/framefleet.whl"
  }

  provisioner "file" {
    source      = "worker_ami/systemd/framefleet-worker.service"
    destination = "/tmp/framefleet-worker.service"
  }

  provisioner "shell" {
    script           = "worker_ami/packer/provision.sh"
    environment_vars = ["WARM_MODELS=${var.warm_models}"]
    execute_command  = "sudo -E bash '{{ .Path }}'"
  }
}
