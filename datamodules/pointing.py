"""YouCook-Interactions / GroundingYouTube segments as model inputs, for the pointing benchmarks' predict.

A sample holds the segment's frames at 5 fps (:func:`formats.pointing_records.sample_timestamps`),
preprocessed for both encoders, and the answer the released inference teacher-forces: the caption
as one grounded phrase, ``<p> caption </p> [DET]``. The model grounds it on every sampled frame and
keeps, per target second, the box of the nearest sampled frame
(:func:`lightning_modules.pointing.pointing_predictions`); ``metrics.protocols.pointing`` scores the result.

Frames are read by timestamp: the frame shown at or after each sampled time
(:func:`formats.pointing_records.frame_at_seconds`, from the video's own frame rate).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from datamodules.grounded_datamodule import GroundedVideoDataModule
from datamodules.grounded_dataset import GroundedClipDataset
from formats.pointing_records import (
    POINTING_FPS,
    PointingRecord,
    dataset_fields,
    frame_at_seconds,
    read_pointing_records,
    sample_timestamps,
)
from formats.video_files import open_video
from models.grove.clip_processing import GroundedCollate
from models.grove.image_processing import preprocess_global, preprocess_grounding


def pointing_answer(caption: str) -> str:
    """The released inference's teacher-forced answer: the whole caption as one grounded phrase."""
    return f"<p> {caption.strip()} </p> [DET]"


class PointingClipDataset(GroundedClipDataset):
    """Segments of a pointing benchmark -> samples (every sampled frame; no boxes to learn from)."""

    target_fps: float = POINTING_FPS

    def load(self, record: PointingRecord, rng: np.random.Generator) -> dict[str, Any]:
        sampled = sample_timestamps(record.pts, record.fps, self.target_fps)
        with open_video(self.video_root, record.video_fname) as video:
            fps = video.fps or record.fps
            frame_indices = frame_at_seconds(sampled, fps)
            frames = video.read_frames(frame_indices.tolist())
        n, caption = len(sampled), record.caption.strip()
        return {
            "key": record.key,
            "video_fname": record.video_fname,
            "global_frames": preprocess_global(frames, self.global_image_size, self.global_resize),
            "grounding_frames": preprocess_grounding(frames, self.grounding_image_size, self.grounding_resize),
            "boxes": torch.zeros(n, 1, 4),
            "present": torch.zeros(n, 1, dtype=torch.bool),
            "phrases": [caption],
            "tagged_caption": f"<p>{caption}</p>",
            "caption": record.caption,
            "frame_indices": torch.from_numpy(frame_indices),
            "caption_positions": torch.arange(self.num_frames).clamp(max=n - 1),
            # boxes are scaled by the annotated size, as the released inference does
            "size": torch.tensor([record.width, record.height], dtype=torch.int64),
            "answer": pointing_answer(record.caption),
            "sampled_pts": sampled,
            "target_seconds": record.target_seconds,
        }


class PointingCollate(GroundedCollate):
    """:class:`GroundedCollate` plus the lists ``answers``, ``sampled_pts`` and ``target_seconds``."""

    def __call__(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        batch = super().__call__(samples)
        kept = [s for s in samples if "key" in s]
        if kept:
            batch["answers"] = [s["answer"] for s in kept]
            batch["sampled_pts"] = [s["sampled_pts"] for s in kept]
            batch["target_seconds"] = [s["target_seconds"] for s in kept]
        return batch


class PointingDataModule(GroundedVideoDataModule):
    """YouCook-Interactions or GroundingYouTube (``dataset``: ``youcook`` or ``groundingyoutube``) for
    ``cli.py predict``: ``test_annotations`` is the benchmark's ``full_annotations.pkl``, ``video_root``
    the folder its ``video_fname`` entries are relative to. ``target_fps``: the frame sampling rate (5)."""

    dataset_class = PointingClipDataset
    collate_class = PointingCollate

    def __init__(self, dataset: str = "youcook", target_fps: float = POINTING_FPS, **kwargs):
        dataset_fields(dataset)  # validates the name
        super().__init__(**kwargs)
        self.pointing_dataset = dataset
        self.target_fps = float(target_fps)

    def setup(self, stage: str | None = None) -> None:
        if stage != "predict":
            raise ValueError(f"data: {type(self).__name__} serves `cli.py predict` only (got stage {stage!r}); "
                             "score its predictions with `grove pointing` (docs/pointing_benchmarks.md)")
        super().setup(stage)

    def load_records(self, split: str, path: Path):
        return read_pointing_records(path, self.pointing_dataset)

    def make_dataset(self, split: str) -> PointingClipDataset:
        dataset = super().make_dataset(split)
        dataset.target_fps = self.target_fps
        return dataset


__all__ = ["PointingClipDataset", "PointingCollate", "PointingDataModule", "pointing_answer"]
