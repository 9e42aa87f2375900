terraform {
  # 1.9: a variable's validation may read the module's locals (the settings table).
  required_version = ">= 1.9"
  required_providers {
    aws = {
      source = "hashicorp/aws"
      # Tested with 5.100 (the provider mirror the developers and CI plan and rehearse with);
      # 6.0 renames and removes arguments FrameFleet uses: a major version is a release of ours.
      version = ">= 5.100, < 6.0"
    }
  }
}
