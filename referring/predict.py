"""Grounding a benchmark's queries clip by clip with a trained GROVE (:mod:`models.grove.query_grounding`)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from formats.records import GroundedRecord
from formats.video_files import open_video
from models.grove.processing import ground_queries
from models.grove.query_grounding import parse_queries


def ground_record_queries(model, processor, record: GroundedRecord, queries: Sequence[str],
                          frames: np.ndarray | None = None, video_root: str | Path = "/") -> dict[str, dict]:
    """``queries`` grounded on the whole clip of ``record`` (its grid frames, decoded from ``video_root``
    unless ``frames`` are given): per query key (:func:`models.grove.query_grounding.query_key`) its entry."""
    checked = parse_queries(model, queries)
    if frames is None:
        with open_video(Path(video_root), record.video_fname) as video:
            frames = video.read_frames(record.frame_indices.tolist())
    inference = processor.inference
    return ground_queries(model, processor.sample(frames, record), checked, inference["objectness_threshold"],
                          inference["objectness_strict"], inference["window_mode"], processor.masker,
                          frames if processor.masker is not None else None)


def ground_all(model, processor, items: Iterable[tuple[GroundedRecord, Sequence[str]]], video_root: str | Path = "/",
               progress: Callable[[int], None] | None = None) -> dict[str, dict]:
    """Every (record, its queries) pair grounded (:func:`ground_record_queries`), entries merged."""
    out: dict[str, dict] = {}
    for n, (record, queries) in enumerate(items, 1):
        out.update(ground_record_queries(model, processor, record, queries, video_root=video_root))
        if progress is not None:
            progress(n)
    return out


__all__ = ["ground_all", "ground_record_queries"]
