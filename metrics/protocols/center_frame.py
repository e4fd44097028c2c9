"""The GROVE paper's "Center" set-up (section 6.2, Table 2 rows a-c): each clip scored on its centre
annotated frame only.

GLaMM, a still-image model, has no video-level caption, so the paper scores its prediction for
the centre frame of each clip; GROVE's Center rows are scored the same way for comparison.

The centre frame, exactly: a clip's annotated frames are its 5-fps grid
(:func:`formats.frame_grids.annotation_grid`), ``N`` source-frame numbers ``g[0] < ... < g[N-1]``;
its centre frame is ``g[N // 2]`` (for even ``N`` the later of the two middle frames). The
ground truth keeps that frame's boxes; the prediction keeps its entry whose ``frame`` equals
that number (none: the clip is predicted empty there); the caption is scored as it is. A clip is
then a one-frame video, so the video-level metrics (per clip, averaged over clips) are the Center
figures, and a clip whose centre frame has no ground-truth box leaves the grounding averages.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Iterator, Mapping

import numpy as np


def centre_position(num_frames: int) -> int:
    """Index of the centre among ``num_frames`` annotated frames: ``num_frames // 2``."""
    if num_frames < 1:
        raise ValueError(f"a clip has no annotated frame (num_frames={num_frames})")
    return int(num_frames) // 2


def centre_frame(record) -> int:
    """Source-frame number of a record's centre annotated frame."""
    grid = np.asarray(record.frame_indices)
    return int(grid[centre_position(len(grid))])


def centre_record(record):
    """The record cut to its centre annotated frame (a one-frame clip: start = end = that frame)."""
    i = centre_position(len(record.bboxes))
    frame = centre_frame(record)
    return replace(record, clip_start_frame=frame, clip_end_frame=frame, bboxes=[record.bboxes[i]],
                   labels=[list(record.labels[i])], extra=dict(record.extra),
                   masks=None if getattr(record, "masks", None) is None else [list(record.masks[i])])


def centre_prediction(prediction: Mapping[str, Any], frame: int) -> dict[str, Any]:
    """A prediction (the JSON format) with only its entry for source frame ``frame``; caption kept."""
    if not isinstance(prediction, Mapping) or not isinstance(prediction.get("frames"), list):
        return prediction  # malformed: left for the evaluator to name
    kept = [f for f in prediction["frames"] if not isinstance(f, Mapping) or f.get("frame") == frame]
    return {**prediction, "frames": kept}


def centre_records(records: Mapping[str, Any]) -> dict:
    """``{key: record cut to its centre annotated frame}``."""
    return {k: centre_record(r) for k, r in records.items()}


def centre_items(records: Mapping[str, Any], items: Iterable[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    """``(key, prediction)`` pairs with each prediction cut to its record's centre frame, lazily (a
    stream of clips stays a stream); ``records`` may be the cut ones. Clips not in ``records``
    pass as given."""
    for key, prediction in items:
        yield key, (centre_prediction(prediction, centre_frame(records[key])) if key in records else prediction)


def centre_view(records: Mapping[str, Any], predictions: Mapping[str, Any]) -> tuple[dict, dict]:
    """Records and predictions of the Center set-up; predictions of clips not in ``records`` are kept as given."""
    cut = centre_records(records)
    return cut, dict(centre_items(cut, predictions.items()))
