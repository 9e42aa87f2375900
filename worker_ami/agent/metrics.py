"""The worker agent's Prometheus metrics: its jobs and steps, its checkpoint writes, the time
from a spot notice to a durable checkpoint, and its GPUs as NVML reads them at each scrape
(nothing when the machine has no NVIDIA driver, and `framefleet_worker_nvml_up` says so)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from worker_ami.agent.telemetry import GpuTelemetry, NvmlUnavailable, read_gpus

SECONDS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 90, 120)


class WorkerMetrics:
    def __init__(
        self,
        registry: CollectorRegistry,
        gpus: Callable[[], list[GpuTelemetry] | NvmlUnavailable] = read_gpus,
    ) -> None:
        self.jobs_running = Gauge(
            "framefleet_worker_jobs_running", "Jobs running on this worker", registry=registry
        )
        self.jobs = Counter(
            "framefleet_worker_jobs",
            "Attempts ended here, by outcome",
            ["outcome"],
            registry=registry,
        )
        self.steps = Counter(
            "framefleet_worker_denoise_steps", "Denoising steps done here", registry=registry
        )
        self.checkpoint_write = Histogram(
            "framefleet_worker_checkpoint_write_seconds",
            "Checkpoint writes to S3",
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        self.notice_to_durable = Histogram(
            "framefleet_worker_notice_to_durable_seconds",
            "From a spot interruption notice in IMDS to the running job's durable checkpoint",
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        registry.register(_GpuCollector(gpus))


class _GpuCollector(Collector):
    def __init__(self, read: Callable[[], list[GpuTelemetry] | NvmlUnavailable]) -> None:
        self._read = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        gpus = self._read()
        up = GaugeMetricFamily("framefleet_worker_nvml_up", "1 when NVML answered this scrape")
        up.add_metric([], 0.0 if isinstance(gpus, NvmlUnavailable) else 1.0)
        yield up
        if isinstance(gpus, NvmlUnavailable):
            return
        families = {
            "utilization": GaugeMetricFamily(
                "framefleet_worker_gpu_utilization_ratio", "GPU busy share (NVML)", labels=["gpu"]
            ),
            "used": GaugeMetricFamily(
                "framefleet_worker_gpu_memory_used_bytes", "GPU memory in use", labels=["gpu"]
            ),
            "total": GaugeMetricFamily(
                "framefleet_worker_gpu_memory_total_bytes", "GPU memory", labels=["gpu"]
            ),
            "temperature": GaugeMetricFamily(
                "framefleet_worker_gpu_temperature_celsius", "GPU temperature", labels=["gpu"]
            ),
        }
        for gpu in gpus:
            label = [str(gpu.index)]
            families["utilization"].add_metric(label, gpu.utilization_percent / 100)
            families["used"].add_metric(label, gpu.memory_used_bytes)
            families["total"].add_metric(label, gpu.memory_total_bytes)
            families["temperature"].add_metric(label, gpu.temperature_celsius)
        yield from families.values()
