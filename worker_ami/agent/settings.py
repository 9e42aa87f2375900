"""Worker settings: environment (FRAMEFLEET_WORKER_*) and an optional TOML file
(FRAMEFLEET_WORKER_CONFIG)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from kernel.errors import ConfigurationError
from kernel.settings_support import EnvThenTomlSettings, load
from worker_ami.agent.checkpoint_policy import ON_DEMAND_MTBI_HOURS

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
    # Where that file came from (s3://bucket/key): a job naming a model the file lacks sends
    # the worker to read it anew from here, so a new entry counts without a restart.
    model_registry_uri: str | None = Field(default=None, pattern=r"^s3://[^/]+/.+$")
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
    # On on-demand and reserved capacity: the host's mean time between failures (the
    # published rate in `checkpoint_policy`), so their jobs checkpoint too.
    on_demand_mtbi_hours: float = Field(default=ON_DEMAND_MTBI_HOURS, gt=0)
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
    # A GPU the operator put in MIG mode is offered as one slot per MIG instance (each with
    # its GPU and part of it, which the cost ledger charges its jobs). Off: one slot per GPU.
    mig_slots: bool = True
    # Jobs a whole GPU runs at once: it is offered as this many slots, each with an even part
    # of its memory (its render process capped there) and of its price in the cost ledger.
    # Small renders leave a GPU idle between kernels, which a neighbour fills; a large one
    # gains nothing from a neighbour (`benchmarks/gpu_features.py`).
    jobs_per_gpu: int = Field(default=1, ge=1, le=8)
    # Each job renders in a process of its own ("process"); "thread" keeps it in the agent,
    # for debugging only: it isolates nothing and cannot stop a hung step.
    render_isolation: Literal["process", "thread"] = "process"
    # A job's memory limit; unset: this host's memory, less 10% for the agent, split evenly
    # between its GPUs. Its CPU share: the host's cores split evenly (unset), or this many.
    job_memory_gib: float | None = Field(default=None, gt=0)
    job_threads: int | None = Field(default=None, ge=1, le=1024)
    job_gpu_memory_fraction: float = Field(default=0.95, gt=0, le=1)
    scratch_dir: Path | None = None  # jobs' temp directories; unset: the system's temp dir
    # A spare render process per GPU, its imports done, for the next job; unset: on a GPU
    # (whose host has cores to spare), not on the CPU (where it would compete with the jobs).
    render_spare: bool | None = None
    # A render process per GPU started, its imports done, before the worker says hello, so the
    # first job does not wait for one; unset: as `render_spare`.
    render_warm_start: bool | None = None
    # A render process that ended a job cleanly keeps its model loaded for the next job on its
    # GPU, for at most this many jobs (then a fresh process); 1: a new process every job.
    render_reuse_jobs: int = Field(default=20, ge=1, le=10_000)
    # Compile the transformer's blocks (torch.compile, regional) on a GPU; its kernels are
    # cached in `compile_cache_dir`. Off until benchmarks/gpu_step.py shows it pays on the
    # fleet's GPUs, warm-up counted.
    render_compile: bool = False
    compile_cache_dir: Path = Path("/var/cache/framefleet/inductor")
    # The stall watchdog (kernel.stall): a step may take `stall_factor` times its expected
    # time, never less than `stall_floor_s`; the first step also `stall_startup_s`.
    stall_factor: float = Field(default=5.0, ge=1)
    stall_floor_s: float = Field(default=60.0, gt=0)
    stall_startup_s: float = Field(default=60.0, ge=0)
    load_timeout_s: float = Field(default=900.0, gt=0)
    # Tests only: a JSON file {job_id: {"block_at_step": n, ...}} of faults to inject into
    # the render processes (worker_ami/agent/render_child.py). Never set in production.
    render_test_hooks: Path | None = None

    def require_checkpoint_bucket(self) -> str:
        if not self.checkpoint_bucket:
            raise ConfigurationError("set FRAMEFLEET_WORKER_CHECKPOINT_BUCKET")
        return self.checkpoint_bucket

    def mtbi_seconds(self, lifecycle: str) -> float:
        """What the Young/Daly interval is computed for: the spot pool's interruptions, or on
        any other market (on-demand, reserved) the host's failures."""
        hours = self.spot_mtbi_hours if lifecycle == "spot" else self.on_demand_mtbi_hours
        return hours * 3600.0


def load_worker_settings() -> WorkerSettings:
    return load(WorkerSettings, "worker settings")
