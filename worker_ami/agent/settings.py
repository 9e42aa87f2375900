"""Worker settings: environment (FRAMEFLEET_WORKER_*) and an optional TOML file
(FRAMEFLEET_WORKER_CONFIG)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import ClassVar

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from kernel.errors import ConfigurationError
from kernel.settings_support import EnvThenTomlSettings, load

CONFIG_FILE_ENV = "FRAMEFLEET_WORKER_CONFIG"
GIB = 1024**3


class WorkerSettings(EnvThenTomlSettings):
    config_file_env: ClassVar[str] = CONFIG_FILE_ENV
    model_config = SettingsConfigDict(env_prefix="FRAMEFLEET_WORKER_", extra="ignore")

    region: str = "us-east-1"
    endpoint_url: str | None = None
    checkpoint_bucket: str | None = None
    checkpoint_root: str = "checkpoints"
    checkpoints_kept: int = Field(default=2, ge=1, le=10)
    model_registry: Path = Path("/etc/framefleet/models.json")
    cache_dir: Path = Path("/var/cache/framefleet/models")
    cache_budget_gib: float = Field(default=200.0, gt=0)
    imds_url: str = "http://169.254.169.254"
    imds_enabled: bool = True
    imds_poll_seconds: float = Field(default=2.0, gt=0)
    device: str = Field(default="auto", pattern=r"^(auto|cpu|cuda(:\d+)?)$")
    allow_cpu: bool = False
    min_free_disk_gib: float = Field(default=20.0, ge=0)
    # Mean time between interruptions for spot pools (the autoscaler refines it per pool).
    spot_mtbi_hours: float = Field(default=6.0, gt=0)
    initial_checkpoint_write_s: float = Field(default=2.0, gt=0)
    # On spot, at most this long between checkpoints: the autoscaler's deadline rule counts
    # on no interruption losing more (its `checkpoint_interval_seconds`).
    max_checkpoint_interval_s: float = Field(default=600.0, gt=0)
    # The MQTT service (`framefleet-worker serve`).
    worker_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    mqtt_host: str = "127.0.0.1"
    mqtt_port: int = Field(default=1883, ge=1, le=65535)
    mqtt_username: str | None = None
    mqtt_password: SecretStr | None = None
    mqtt_tls: bool = False
    mqtt_ca_file: Path | None = None  # the broker's CA; None: the system's
    heartbeat_seconds: float = Field(default=2.0, gt=0)
    # /metrics, /healthz and /readyz of `serve` (loopback unless asked: Prometheus's agent on
    # the instance, or a security group that admits the scraper, reaches it).
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    metrics_host: str = "127.0.0.1"
    # Without NVML (CPU mode) the worker offers this many slots of this family and memory.
    cpu_slots: int = Field(default=1, ge=1, le=64)
    cpu_family: str = Field(default="cpu", pattern=r"^[a-z0-9]{1,16}$")
    cpu_vram_gib: float = Field(default=24.0, gt=0)

    def require_checkpoint_bucket(self) -> str:
        if not self.checkpoint_bucket:
            raise ConfigurationError("set FRAMEFLEET_WORKER_CHECKPOINT_BUCKET")
        return self.checkpoint_bucket

    def mtbi_seconds(self, lifecycle: str) -> float:
        return self.spot_mtbi_hours * 3600.0 if lifecycle == "spot" else math.inf


def load_worker_settings() -> WorkerSettings:
    return load(WorkerSettings, "worker settings")
