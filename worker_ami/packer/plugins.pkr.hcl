# The amazon plugin (Packer 1.7 and newer: `packer init worker_ami/packer` installs it).
packer {
  required_plugins {
    amazon = {
      source  = "github.com/hashicorp/amazon"
      version = ">= 1.3.0"
    }
  }
}
