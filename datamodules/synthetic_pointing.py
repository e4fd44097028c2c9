"""Synthetic data in the YouCook-Interactions / GroundingYouTube layout, to run the pointing benchmark offline.

Each segment is a short video of one coloured square moving over a grey background; the caption
names the square, and each target second's ground-truth box is the square's box at that second
(every fourth second left without a box, as annotators leave some). Written as the benchmarks
distribute them: ``OUT/videos/<video_id>.mp4`` and ``OUT/full_annotations.pkl`` (a list of dicts
with the fields :mod:`formats.pointing_records` reads; frame rates of 24, 25 and 30 so the
5-fps stride differs between segments)::

    grove synthetic-pointing --out data/synthetic_youcook --dataset youcook
"""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from formats.pointing_records import dataset_fields
from formats.video_writer import write_video

COLOURS = {"red": (220, 40, 40), "green": (40, 190, 60), "blue": (50, 80, 230), "yellow": (230, 210, 40)}
FRAME_RATES = (30.0, 25.0, 24.0)


def square_boxes(rng: np.random.Generator, num_frames: int, width: int, height: int) -> np.ndarray:
    """``(num_frames, 4)`` pixel boxes of a square moving on a straight line inside the frame."""
    side = int(rng.integers(height // 4, height // 2))
    start = rng.uniform([0, 0], [width - side, height - side])
    end = rng.uniform([0, 0], [width - side, height - side])
    t = np.linspace(0.0, 1.0, num_frames)[:, None]
    corner = np.round(start + (end - start) * t)
    return np.concatenate((corner, corner + side), axis=1)


def render(boxes: np.ndarray, colour: tuple[int, int, int], width: int, height: int) -> np.ndarray:
    """``(N, H, W, 3)`` uint8 frames: grey background, the square filled at each frame's box."""
    ys, xs = np.arange(height)[None, :, None], np.arange(width)[None, None, :]
    inside = ((xs >= boxes[:, 0, None, None]) & (xs < boxes[:, 2, None, None])
              & (ys >= boxes[:, 1, None, None]) & (ys < boxes[:, 3, None, None]))
    frames = np.full((len(boxes), height, width, 3), 110, dtype=np.uint8)
    frames[inside] = colour
    return frames


def make_segment(index: int, dataset: str, videos: Path, rng: np.random.Generator, width: int, height: int,
                 duration_s: float) -> dict:
    """Write one segment's video; return its annotation record."""
    segment_field, seconds_field = dataset_fields(dataset)
    fps = FRAME_RATES[index % len(FRAME_RATES)]
    num_frames = int(round(duration_s * fps))
    boxes = square_boxes(rng, num_frames, width, height)
    name = list(COLOURS)[index % len(COLOURS)]
    video_id = f"synth{index:03d}"
    write_video(videos / f"{video_id}.mp4", render(boxes, COLOURS[name], width, height), fps, threads=1)
    pts = (np.arange(num_frames) / fps).tolist()
    seconds = np.arange(0.0, duration_s - 0.25, 0.5)  # target seconds every half second
    at = np.minimum(np.round(seconds * fps).astype(int), num_frames - 1)
    segment_boxes = [None if k % 4 == 3 else [float(v) for v in boxes[f]] for k, f in enumerate(at)]
    return {"video_id": video_id, "video_fname": f"{video_id}.mp4", "caption": f" move the {name} square ",
            "pts": pts, seconds_field: seconds.tolist(), "fps": fps, "width": width, "height": height,
            segment_field: index % 3, "segment_bboxes": segment_boxes}


def generate_pointing_dataset(out: str | Path, dataset: str = "youcook", num_clips: int = 6, seed: int = 0,
                              width: int = 96, height: int = 64, duration_s: float = 3.0) -> Path:
    """Write ``num_clips`` synthetic segments under ``out``; returns the annotation file's path."""
    out = Path(out)
    rng = np.random.default_rng(seed)
    records = [make_segment(i, dataset, out / "videos", rng, width, height, duration_s) for i in range(num_clips)]
    path = out / "full_annotations.pkl"
    with path.open("wb") as f:
        pickle.dump(records, f)
    return path
