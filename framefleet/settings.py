"""Settings from environment variables (FRAMEFLEET_*) and an optional TOML file.

Precedence: explicit arguments, then environment, then the TOML file named by
FRAMEFLEET_CONFIG (or `framefleet --config FILE`), then defaults.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr
from pydantic_settings import SettingsConfigDict
from sqlalchemy.engine import make_url

from autoscaler.snapshot import DEFAULT_CANDIDATE_TYPES, PurchaseSettings, SplitMode
from framefleet.api_settings import ApiConfig
from framefleet.scheduling_settings import SchedulingConfig
from kernel.errors import ConfigurationError
from kernel.job_spec import DEFAULT_MAX_MESSAGE_BYTES
from kernel.mqtt_link import LinkSettings
from kernel.notify_spec import WebhookRule
from kernel.replay_clock import PaceFile, ReplayClock
from kernel.settings_support import EnvThenTomlSettings, load
from orchestrator.costs.ledger import CostSettings
from orchestrator.intake.loop import IntakeSettings
from orchestrator.interruptions.loop import InterruptionSettings

CONFIG_FILE_ENV = "FRAMEFLEET_CONFIG"
OUTPUT_PREFIX = r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/"  # a bucket, then a key prefix


class IntakeConfig(BaseModel):
    concurrency: int = Field(default=4, ge=1, le=64)
    batch_size: int = Field(default=10, ge=1, le=10)
    wait_seconds: int = Field(default=20, ge=0, le=20)
    visibility_timeout: int = Field(default=60, ge=2, le=43200)
    # SQS SenderId (the IAM user's or role's unique id: AIDA..., AROA...) -> the teams it
    # submits for: an SQS job's team comes from its sender, not its message. Empty: the
    # message's tag stands.
    sender_teams: dict[str, list[str]] = Field(default_factory=dict, max_length=10000)

    def to_settings(
        self,
        max_message_bytes: int,
        output_prefixes: tuple[str, ...] = (),
        webhooks: WebhookRule | None = None,
    ) -> IntakeSettings:
        return IntakeSettings(
            concurrency=self.concurrency,
            batch_size=self.batch_size,
            wait_seconds=self.wait_seconds,
            visibility_timeout=self.visibility_timeout,
            max_message_bytes=max_message_bytes,
            output_prefixes=output_prefixes,
            webhooks=webhooks or WebhookRule(),
            sender_teams={sender: tuple(teams) for sender, teams in self.sender_teams.items()},
        )


class MqttConfig(BaseModel):
    # None: the control plane runs the intake only (no workers to drive).
    host: str | None = None
    port: int = Field(default=1883, ge=1, le=65535)
    username: str = "framefleet-control-plane"
    password: SecretStr | None = None
    # None: one of this replica's own (replicas must not share one: a broker drops the older
    # connection of a client id when another connects with it).
    client_id: str | None = Field(default=None, max_length=64)
    # TLS to the broker (a deployment's broker; the demo and tests run it plain on loopback).
    tls: bool = False
    ca_file: Path | None = None  # the broker's CA; None: the system's


class ControlConfig(BaseModel):
    tick_seconds: float = Field(default=0.5, gt=0)
    # The leader lease: one replica schedules and moves jobs; a standby takes over within this.
    lease_seconds: float = Field(default=10.0, ge=2, le=600)
    # This replica's name in the lease and its MQTT client id (None: a random one). At most 23
    # characters: MQTT 3.1.1 promises no longer client ids.
    replica_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,23}$")
    resend_after_seconds: float = Field(default=3.0, gt=0)
    suspect_after_seconds: float = Field(default=10.0, gt=0)
    lost_after_seconds: float = Field(default=30.0, gt=0)
    max_attempts: int = Field(default=6, ge=1)
    max_job_faults: int = Field(default=2, ge=1)
    # Believe workers that run on no EC2 instance (a development fleet sharing one broker
    # account): nothing vouches for who they are or what hardware they have.
    workers_off_ec2: bool = False
    # Each worker's messages: the rate and burst read; past them dropped and counted, and a
    # worker that keeps flooding is quarantined (no new work, its instance drained).
    worker_messages_per_second: float = Field(default=50.0, gt=0, le=100_000)
    worker_message_burst: float = Field(default=200.0, ge=1, le=1_000_000)
    scheduling: SchedulingConfig = Field(default_factory=SchedulingConfig)


class InterruptionsConfig(BaseModel):
    # Older EventBridge events are logged and ignored: heartbeat timeouts have settled them.
    max_event_age_seconds: float = Field(default=900.0, gt=0)
    # Receives of an event whose action keeps failing before it is dead-lettered.
    max_tries: int = Field(default=5, ge=1, le=100)


class BrokerAdminConfig(BaseModel):
    """The autoscaler's admin account on the broker's dynamic-security plugin, with which it
    gives each worker an account of its own (infra/mosquitto/bootstrap.sh makes it)."""

    host: str
    port: int = Field(default=8883, ge=1, le=65535)
    username: str = "framefleet-autoscaler"
    password: SecretStr
    client_id: str = "framefleet-autoscaler"
    # The control plane's broker password (its `mqtt.password`), which the autoscaler sets on
    # the control plane's account (None: that account is managed by hand).
    control_plane_password: SecretStr | None = None
    tls: bool = True
    ca_file: Path | None = None

    def link(self) -> LinkSettings:
        return LinkSettings(
            host=self.host,
            port=self.port,
            client_id=self.client_id,
            username=self.username,
            password=self.password.get_secret_value(),
            tls=self.tls,
            ca_file=str(self.ca_file) if self.ca_file else None,
        )


class ModelArchitectureConfig(BaseModel):
    """A model's size as the step-time model needs it (kernel/step_time.py)."""

    model_config = ConfigDict(extra="forbid")
    parameters: float = Field(gt=0, le=1e13, description="of the video transformer")
    layers: int = Field(ge=1, le=1000)
    width: int = Field(ge=1, le=100_000, description="hidden size (heads x head width)")


class AutoscalerConfig(BaseModel):
    fleet_id: str = Field(default="framefleet", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    launch_template: str = "framefleet-worker"
    # GPU family -> a launch template of its own (infra's worker_fleet module makes one per
    # family in `family_ami_ids`); families left out launch from `launch_template`.
    launch_templates: dict[str, str] = Field(default_factory=dict)
    image_id: str | None = Field(default=None, description="worker AMI, for a new template")
    zones: list[str] = Field(default_factory=lambda: ["us-east-1a", "us-east-1b", "us-east-1c"])
    candidate_types: list[str] = Field(default_factory=lambda: list(DEFAULT_CANDIDATE_TYPES))
    budget_per_hour: float = Field(default=PurchaseSettings.budget_per_hour, ge=0)
    budget_per_day: float = Field(default=PurchaseSettings.budget_per_day, ge=0)
    idle_timeout_seconds: float = Field(default=600.0, ge=0)
    warm_minimum: int = Field(default=0, ge=0)
    interval_seconds: float = Field(default=30.0, gt=0)
    use_create_fleet: bool = True
    # Zone -> VPC subnet id to launch into (a VPC deployment); zones left out use the default
    # VPC.
    subnets: dict[str, str] = Field(default_factory=dict)
    # What the policy assumes a new instance takes to say hello, and a job to load its model.
    boot_seconds: float = Field(default=150.0, ge=0)
    model_load_seconds: float = Field(default=60.0, ge=0)
    # What an hour of a job's waiting for a boot is worth (USD): pre-warming buys or keeps idle
    # spot GPUs for the forecast's arrivals when the waiting saved is worth more (0: off).
    prewarm_wait_value_per_job_hour: float = Field(default=0.0, ge=0, le=10_000)
    # A job alone on on-demand moves back to spot when the move saves more than this many hours
    # of its on-demand GPU (and its deadline allows).
    return_to_spot: bool = True
    return_to_spot_margin_hours: float = Field(default=0.5, ge=0, le=100)
    # Which queued renders are split into stages on GPUs of their own (encoding, denoising,
    # decoding; autoscaler/stage_split.py): where the render planner finds it cheaper at the
    # market's prices (auto), never, or every one that may be (always: tests, demos).
    split_renders: SplitMode = SplitMode.AUTO
    # Deadline jobs' market by the spot planner (autoscaler/planned_market.py) over the
    # capacity this autoscaler has seen; off: the simple rule alone.
    spot_planner: bool = True
    # The most work one interruption may lose, which the deadline rule counts on: the
    # workers' `max_checkpoint_interval_s` on spot.
    checkpoint_interval_seconds: float = Field(default=600.0, gt=0, le=86_400)
    # Model name -> its transformer's size, for the step-time model's first guess of a step
    # (Wan 2.1 1.3B and 14B are built in; others are read from the size in their name).
    models: dict[str, ModelArchitectureConfig] = Field(default_factory=dict, max_length=256)
    # The Spot Instance Advisor feed; unreachable means the snapshot shipped with the package.
    advisor_url: str = "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json"
    # Its /metrics, /healthz and /readyz (a port of its own: it is a process of its own).
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    # Per-worker broker accounts (None: workers share the broker's configured credentials);
    # each instance's password lies in SSM at `<worker_credentials_path>/<instance-id>`.
    broker_admin: BrokerAdminConfig | None = None
    worker_credentials_path: str = Field(default="/framefleet/workers", pattern=r"^(/[\w.-]+)+$")


class CostsConfig(BaseModel):
    """The ledger's storage prices and the finance reports' recipients and schedule."""

    billing_account_id: str = Field(default="framefleet", max_length=64)  # FOCUS's
    ebs_gib: int = Field(default=200, ge=1, le=65536)  # each worker's root volume (gp3)
    ebs_usd_per_gib_month: Decimal = Field(default=Decimal("0.08"), ge=0)
    finance_recipients: list[str] = Field(default_factory=list, max_length=50)
    sender: str | None = None  # a verified SES identity
    # Periods the control plane sends on schedule, each once, after the period has ended.
    scheduled_reports: list[Literal["day", "week", "month"]] = ["day", "week"]
    report_dir: Path = Path("reports")  # where each report's HTML, CSV and charts are kept
    # The month's GPU budget in USD: each report sets the month's forecast against it.
    monthly_budget_usd: Decimal | None = Field(default=None, ge=0)

    def ledger(self) -> CostSettings:
        return CostSettings(ebs_gib=self.ebs_gib, ebs_usd_per_gib_month=self.ebs_usd_per_gib_month)


class NoticesConfig(BaseModel):
    """Completion notices (README, "Completion notices")."""

    # The EventBridge bus every job's end, interruption and resume goes to (its name or ARN;
    # Terraform makes one). None: no bus.
    event_bus: str | None = None
    # The key webhooks are signed with (HMAC-SHA256; Terraform keeps it in Secrets Manager).
    # None: this deployment sends no webhooks, and a job naming one is refused at the door.
    webhook_secret: SecretStr | None = None
    # Non-public networks a webhook may point into all the same (CIDRs), and plain http: a
    # test bench's, never production's.
    webhook_allowed_networks: tuple[str, ...] = ()
    webhook_allow_http: bool = False
    webhook_timeout_seconds: float = Field(default=10.0, gt=0, le=60)
    max_attempts: int = Field(default=12, ge=1, le=100)

    def rule(self) -> WebhookRule:
        return WebhookRule.of(
            self.webhook_allowed_networks, self.webhook_allow_http, self.webhook_secret is not None
        )


class ReplayConfig(BaseModel):
    """A spot trace replayed in compressed time instead of the live market (the demo): the
    autoscaler's prices and spot capacity, and the local fleet's interruptions, come from it.
    Every process is given the same values, so they agree on the trace's moment."""

    trace: Path
    start: datetime = Field(description="the trace moment the replay starts at")
    epoch: datetime = Field(description="the wall-clock moment the replay started")
    speed: float = Field(default=120.0, gt=0, le=100_000)
    # Where the demo holds the replay while its fleet boots (kernel/replay_clock.py).
    pace_file: Path | None = None
    end: datetime | None = Field(default=None, description="the replay stands still here")

    def clock(self) -> ReplayClock:
        pace = PaceFile(self.pace_file) if self.pace_file is not None else None
        return ReplayClock(self.start, self.epoch, self.speed, pace=pace, end=self.end)


class Settings(EnvThenTomlSettings):
    config_file_env: ClassVar[str] = CONFIG_FILE_ENV
    model_config = SettingsConfigDict(
        env_prefix="FRAMEFLEET_", env_nested_delimiter="__", extra="ignore"
    )

    region: str = "us-east-1"
    endpoint_url: str | None = Field(default=None, description="AWS endpoint (moto, LocalStack)")
    jobs_queue_url: str | None = None
    dead_letter_queue_url: str | None = None
    # May carry a password: SecretStr keeps it out of reprs and logs.
    database_url: SecretStr = SecretStr("sqlite:///framefleet.db")
    # The password on its own, for a URL without one (ECS injects it from the secret RDS keeps).
    database_password: SecretStr | None = None

    def store_url(self) -> str:
        url = self.database_url.get_secret_value()
        if self.database_password is None:
            return url
        with_password = make_url(url).set(password=self.database_password.get_secret_value())
        return with_password.render_as_string(hide_password=False)

    max_message_bytes: int = Field(default=DEFAULT_MAX_MESSAGE_BYTES, ge=1024, le=1024 * 1024)
    # The s3:// prefixes a job's output must lie under: where the workers may write (Terraform
    # passes the bucket's videos/). Empty: anywhere, and a job that cannot upload fails there.
    output_prefixes: tuple[Annotated[str, Field(pattern=OUTPUT_PREFIX)], ...] = ()
    # The model registry the workers resolve models through (s3://bucket/key, or a local file):
    # with it, the control plane (and `framefleet submit`) refuses a job naming a model it does
    # not hold, and gives a job its model's GPU need; read again every
    # `model_registry_refresh_seconds`. Unset: any model name is accepted (checked by workers).
    model_registry: str | None = None
    model_registry_refresh_seconds: float = Field(default=60.0, gt=0)
    auto_migrate: bool = True
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    # Loopback unless asked: the metrics say which jobs run where, for anyone who can connect.
    metrics_host: str = "127.0.0.1"
    log_level: str = "INFO"
    # Libraries' loggers (botocore, aiomqtt, sqlalchemy) stay at INFO unless set here: at
    # DEBUG they log credentials and whole job bodies.
    library_log_level: str | None = None
    # "json": one JSON object per line with the job, attempt, worker and instance ids, for a
    # log shipper; "text" for people.
    log_format: Literal["text", "json"] = "text"
    intake: IntakeConfig = Field(default_factory=IntakeConfig)
    mqtt: MqttConfig = Field(default_factory=MqttConfig)
    control: ControlConfig = Field(default_factory=ControlConfig)
    autoscaler: AutoscalerConfig = Field(default_factory=AutoscalerConfig)
    # EventBridge EC2 events (spot warnings, rebalance, state changes) delivered to SQS.
    interruptions_queue_url: str | None = None
    interruptions: InterruptionsConfig = Field(default_factory=InterruptionsConfig)
    replay: ReplayConfig | None = None
    costs: CostsConfig = Field(default_factory=CostsConfig)
    api: ApiConfig = Field(default_factory=ApiConfig)
    notices: NoticesConfig = Field(default_factory=NoticesConfig)

    def interruption_settings(self) -> InterruptionSettings:
        return InterruptionSettings(
            region=self.region,
            max_event_age=timedelta(seconds=self.interruptions.max_event_age_seconds),
            wait_seconds=self.intake.wait_seconds,
            max_tries=self.interruptions.max_tries,
        )

    def require_jobs_queue(self) -> str:
        """A producer needs the jobs queue alone (README, deploy step 8)."""
        if not self.jobs_queue_url:
            raise ConfigurationError(
                "set FRAMEFLEET_JOBS_QUEUE_URL (or jobs_queue_url in the config file)"
            )
        return self.jobs_queue_url

    def require_queues(self) -> tuple[str, str]:
        if not self.jobs_queue_url or not self.dead_letter_queue_url:
            raise ConfigurationError(
                "set FRAMEFLEET_JOBS_QUEUE_URL and FRAMEFLEET_DEAD_LETTER_QUEUE_URL "
                "(or jobs_queue_url / dead_letter_queue_url in the config file)"
            )
        return self.jobs_queue_url, self.dead_letter_queue_url


def load_settings(config_file: Path | None = None) -> Settings:
    if config_file is not None:
        if not config_file.is_file():
            raise ConfigurationError(f"config file {config_file} does not exist")
        os.environ[CONFIG_FILE_ENV] = str(config_file)
    return load(Settings, "settings")
