"""The demo's pictures: a contact sheet beside each video shows its frames (the real frames,
decoded from the MP4), and a resumed job's strip shows its frames over its twin's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from framefleet.demo_sheets import CAPTION, CELL, COLUMNS, contact_sheet, spaced, twin_strip
from worker_ami.agent.video import encode_mp4


def gradient_video(path: Path, frames: int = 17) -> Path:
    """Frame i is one flat grey level, so a sheet's cell tells which frame it shows."""
    levels = np.linspace(0, 255, frames).astype(np.uint8)
    video = np.stack([np.full((64, 64, 3), level, np.uint8) for level in levels])
    path.write_bytes(encode_mp4(video, fps=8))
    return path


def test_frames_are_spaced_from_first_to_last() -> None:
    frames = [np.zeros((1, 1, 3), np.uint8)] * 17
    assert [index for index, _ in spaced(frames, 8)] == [0, 2, 5, 7, 9, 11, 14, 16]
    assert len(spaced(frames[:3], 8)) == 3


def test_a_contact_sheet_shows_the_videos_frames_beside_it(tmp_path: Path) -> None:
    video = gradient_video(tmp_path / "job-1.mp4")
    sheet = Image.open(contact_sheet(video, "job-1: a prompt"))
    assert sheet.size == (COLUMNS * CELL, CAPTION + 2 * CELL)
    # Below each cell's label, the cell is the frame's grey: darker first, brighter last.
    first = sheet.getpixel((CELL // 2, CAPTION + CELL // 2))
    last = sheet.getpixel((COLUMNS * CELL - CELL // 2, CAPTION + CELL + CELL // 2))
    assert isinstance(first, tuple)
    assert isinstance(last, tuple)
    assert first[0] < 20
    assert last[0] > 235


def test_a_resumed_jobs_strip_sets_its_frames_over_its_twins(tmp_path: Path) -> None:
    resumed = gradient_video(tmp_path / "job-1.mp4")
    twin = gradient_video(tmp_path / "twin.mp4")
    strip = Image.open(twin_strip(resumed, twin, tmp_path / "strip.png", identical=True))
    assert strip.size[0] == 8 * CELL
    assert strip.size[1] > CAPTION + 2 * CELL
