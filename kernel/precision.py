"""What precision a model computes in, per pipeline component, on a given device.

The model registry states each model's compute dtype and the components that stay in fp32 (the
Wan VAE, as diffusers recommends: in bf16 it bands and loses colour). The worker resolves that
against its device: a GPU with no bf16 (T4, V100) computes in fp16 instead, and a CPU in fp32
unless the registry says otherwise (bf16 on a CPU is slow, but it is the same arithmetic a
bf16 GPU checkpoint needs, which is what the tests use it for).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class Dtype(StrEnum):
    BF16 = "bf16"
    FP16 = "fp16"
    FP32 = "fp32"


# The GPU families EC2 offers whose tensor cores have no bf16 (before Ampere).
NO_BF16_FAMILIES = frozenset({"t4", "v100", "p100", "k80", "m60"})
# The pipeline's components a dtype may be set for.
COMPONENTS = ("transformer", "text_encoder", "vae")


class Precision(BaseModel):
    """A model's precision, as the registry states it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    compute: Dtype = Field(default=Dtype.BF16, description="dtype on a GPU that has it")
    fp32_components: tuple[str, ...] = Field(
        default=("vae",), max_length=len(COMPONENTS), description="components kept in fp32"
    )
    on_cpu: Dtype = Field(default=Dtype.FP32, description="dtype on a CPU")


class ComponentDtypes(BaseModel):
    """The dtype each component is loaded in, as the worker resolved it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    transformer: Dtype
    text_encoder: Dtype
    vae: Dtype

    @property
    def compute(self) -> Dtype:
        """The denoising loop's dtype (the transformer's): what a checkpoint is tied to."""
        return self.transformer

    def of(self, component: str) -> Dtype:
        return Dtype(getattr(self, component))


def has_bf16(family: str) -> bool:
    return family not in NO_BF16_FAMILIES


def resolve_dtypes(precision: Precision, device: str, family: str) -> ComponentDtypes:
    """Each component's dtype for `precision` on `device` (cpu, cuda:N) of GPU `family`."""
    if device == "cpu":
        compute = precision.on_cpu
    elif precision.compute is Dtype.BF16 and not has_bf16(family):
        compute = Dtype.FP16
    else:
        compute = precision.compute
    return ComponentDtypes(
        **{
            name: Dtype.FP32 if name in precision.fp32_components else compute
            for name in COMPONENTS
        }
    )
