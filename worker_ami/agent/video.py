"""Frames to MP4 with fixed encoder settings, so equal frames always give equal bytes."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import imageio_ffmpeg
import numpy as np

# Bit-exact output: one thread, no encoder/muxer version strings, no timestamps in metadata.
FFMPEG_PARAMS = [
    "-threads",
    "1",
    "-fflags",
    "+bitexact",
    "-flags",
    "+bitexact",
    "-map_metadata",
    "-1",
    "-preset",
    "medium",
    "-crf",
    "18",
    "-x264-params",
    "threads=1",
]
ENCODER_SETTINGS = {"codec": "libx264", "pix_fmt": "yuv420p", "params": " ".join(FFMPEG_PARAMS)}


def encode_mp4(frames: np.ndarray[Any, np.dtype[np.uint8]], fps: int) -> bytes:
    """frames: (count, height, width, 3) uint8."""
    count, height, width, channels = frames.shape
    if channels != 3:
        raise ValueError("frames must be RGB")
    with tempfile.TemporaryDirectory(prefix="framefleet-video-") as folder:
        path = Path(folder) / "video.mp4"
        writer = imageio_ffmpeg.write_frames(
            str(path),
            (width, height),
            fps=fps,
            codec="libx264",
            pix_fmt_out="yuv420p",
            macro_block_size=1,
            output_params=FFMPEG_PARAMS,
            ffmpeg_log_level="error",
        )
        writer.send(None)
        for index in range(count):
            writer.send(np.ascontiguousarray(frames[index]))
        writer.close()
        return path.read_bytes()
