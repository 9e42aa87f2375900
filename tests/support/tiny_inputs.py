"""Inputs of the tests' jobs: a small PNG (an image-to-video job's first frame) and a LoRA
adapter trained on nothing (random low-rank weights, PEFT's own layout, saved by diffusers'
`save_lora_weights`) for a tiny model's transformer."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import torch
from diffusers import WanPipeline
from peft import LoraConfig
from peft.utils import get_peft_model_state_dict
from PIL import Image


def png_bytes(side: int = 32) -> bytes:
    pixels = (np.arange(side * side * 3) * 7 % 255).astype(np.uint8).reshape(side, side, 3)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def tiny_lora(model_dir: Path, out: Path, seed: int = 1, rank: int = 4) -> Path:
    """A LoRA adapter for the Wan transformer in `model_dir`, as one .safetensors file."""
    transformer = WanPipeline.from_pretrained(str(model_dir)).transformer
    torch.manual_seed(seed)
    config = LoraConfig(
        r=rank,
        lora_alpha=rank,
        target_modules=["to_q", "to_k", "to_v", "to_out.0"],
        init_lora_weights=False,  # random B as well as A: the adapter changes the video
    )
    transformer.add_adapter(config)
    layers = get_peft_model_state_dict(transformer)
    WanPipeline.save_lora_weights(str(out), transformer_lora_layers=layers, safe_serialization=True)
    return out / "pytorch_lora_weights.safetensors"
