"""Something to look at: a contact sheet PNG beside each of the demo's videos, and for each
resumed job a strip of its frames over the frames of its uninterrupted twin.

The demo's model has random weights, so its frames are noise, and every picture says so. What
the pictures show is that the pipeline rendered real frames, and that a job resumed on another
machine from a checkpoint made the same picture as one never interrupted."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import imageio_ffmpeg
import numpy as np
from PIL import Image, ImageDraw, ImageFont

Frame = np.ndarray[Any, np.dtype[np.uint8]]
SHOWN = 8  # frames on a sheet, evenly spaced from first to last
COLUMNS = 4
CELL = 160  # pixels per frame's side on a sheet
CAPTION = 44
RANDOM_WEIGHTS = "random weights: the frames are noise, rendered by the real pipeline"


def video_frames(path: Path) -> list[Frame]:
    """Every frame of an MP4, RGB."""
    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    width, height = meta["size"]
    return [np.frombuffer(raw, np.uint8).reshape(height, width, 3) for raw in reader]


def spaced(frames: Sequence[Frame], count: int = SHOWN) -> list[tuple[int, Frame]]:
    """`count` frames (or all there are), evenly spaced, with their indices."""
    if len(frames) <= count:
        return list(enumerate(frames))
    step = (len(frames) - 1) / (count - 1)
    return [(round(i * step), frames[round(i * step)]) for i in range(count)]


def _font() -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=13)


def _paste_row(sheet: Image.Image, shown: Sequence[tuple[int, Frame]], top: int) -> None:
    draw = ImageDraw.Draw(sheet)
    for column, (index, frame) in enumerate(shown):
        left = column * CELL
        sheet.paste(Image.fromarray(frame).resize((CELL, CELL)), (left, top))
        draw.text((left + 4, top + 2), f"#{index}", fill="white", font=_font())


def contact_sheet(video: Path, title: str) -> Path:
    """`video`'s frames on one PNG beside it (its name, .png)."""
    shown = spaced(video_frames(video))
    rows = (len(shown) + COLUMNS - 1) // COLUMNS
    sheet = Image.new("RGB", (COLUMNS * CELL, CAPTION + rows * CELL), "black")
    for row in range(rows):
        _paste_row(sheet, shown[row * COLUMNS : (row + 1) * COLUMNS], CAPTION + row * CELL)
    draw = ImageDraw.Draw(sheet)
    draw.text((6, 4), title[:80], fill="white", font=_font())
    draw.text((6, 22), RANDOM_WEIGHTS, fill="#ffcc66", font=_font())
    target = video.with_suffix(".png")
    sheet.save(target)
    return target


def twin_strip(resumed: Path, twin: Path, target: Path, identical: bool) -> Path:
    """The resumed video's frames over its uninterrupted twin's, the same frames of each."""
    top, bottom = spaced(video_frames(resumed)), spaced(video_frames(twin))
    label = 22
    width = max(len(top), 1) * CELL
    sheet = Image.new("RGB", (width, CAPTION + 2 * (CELL + label)), "black")
    draw = ImageDraw.Draw(sheet)
    verdict = "identical, bit for bit" if identical else "NOT identical"
    title = f"{resumed.stem}: resumed against uninterrupted: {verdict}"
    draw.text((6, 4), title, fill="white", font=_font())
    draw.text((6, 22), RANDOM_WEIGHTS, fill="#ffcc66", font=_font())
    for row, (name, shown) in enumerate(
        (("resumed from a checkpoint on another instance", top), ("never interrupted", bottom))
    ):
        y = CAPTION + row * (CELL + label)
        draw.text((6, y + 4), name, fill="white", font=_font())
        _paste_row(sheet, shown, y + label)
    sheet.save(target)
    return target
