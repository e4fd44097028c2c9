"""YouCook-Interactions and GroundingYouTube records, and the frame selection of their benchmark.

Both benchmarks score *pointing*: one caption per video segment and, for a few target seconds of
the segment, one ground-truth box of the activity (or none). They are distributed as one pickle,
``full_annotations.pkl``: a list of dicts with ``video_id``, ``video_fname``, ``caption``, ``pts``
(the segment's frame timestamps, in seconds), the target seconds, ``fps``, ``width``, ``height``,
the segment's index and ``segment_bboxes`` (one ``(x1, y1, x2, y2)`` box or an empty value per
target second). The two files differ in two field names (:data:`POINTING_DATASETS`): the
segment index (``segment_youcook_idx`` / ``segment_groundingyoutube_idx``) and the target seconds
(``secs_relative`` / ``secs_absolute``, as the released GROVE's inference scripts read them). A
clip's key is ``f"{video_id}_{segment_idx}"``.

The benchmark's frame protocol (the released ``infer_youcookinteractions.py``):

- :func:`sample_timestamps`: the segment's timestamps at 5 fps: every ``int(fps / 5)``-th entry
  of ``pts``, plus the last one when the stride skips it;
- :func:`closest_samples`: for each target second, the sampled timestamp nearest to it (the
  earliest on a tie), whose box answers for that second.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from formats.records import RecordError
from formats.safe_pickle import safe_load

# dataset name -> (segment index field, target seconds field)
POINTING_DATASETS = {
    "youcook": ("segment_youcook_idx", "secs_relative"),
    "groundingyoutube": ("segment_groundingyoutube_idx", "secs_absolute"),
}
POINTING_FPS = 5.0


@dataclass
class PointingRecord:
    """One benchmark segment. ``boxes (S, 4)`` float pixel ``xyxy`` with NaN rows where the target
    second has no box (``has_box (S,)`` False); ``target_seconds (S,)`` aligned with them."""

    key: str
    video_id: str
    video_fname: str
    caption: str
    pts: np.ndarray
    target_seconds: np.ndarray
    fps: float
    width: int
    height: int
    boxes: np.ndarray
    has_box: np.ndarray


def dataset_fields(dataset: str) -> tuple[str, str]:
    """``(segment index field, target seconds field)`` of a benchmark name."""
    if dataset not in POINTING_DATASETS:
        raise ValueError(f"pointing dataset must be one of {sorted(POINTING_DATASETS)}, got {dataset!r}")
    return POINTING_DATASETS[dataset]


def is_empty_box(value) -> bool:
    """An "empty value" of ``segment_bboxes``: None, or a container without elements."""
    return value is None or np.size(value) == 0


def gt_boxes(values, where: str) -> tuple[np.ndarray, np.ndarray]:
    """``segment_bboxes`` -> ``(boxes (S, 4) float, has_box (S,))``; a present box must hold 4 numbers."""
    if values is None:
        values = []
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise RecordError(f"{where}: segment_bboxes must be a list (one box or an empty value per target "
                          f"second), got {type(values).__name__}")
    has_box = np.array([not is_empty_box(v) for v in values], dtype=bool)
    boxes = np.full((len(values), 4), np.nan)
    for i in np.flatnonzero(has_box):  # parsing the pickle's ragged entries; scoring is vectorised
        try:
            box = np.asarray(values[i], dtype=float).reshape(-1)
        except (TypeError, ValueError):
            box = np.empty(0)
        if box.size != 4:
            raise RecordError(f"{where}: segment_bboxes[{i}] must be 4 numbers (x1, y1, x2, y2) or empty, "
                              f"got {values[i]!r}")
        boxes[i] = box
    return boxes, has_box


def _number_list(entry: dict, name: str, where: str) -> np.ndarray:
    try:
        values = np.asarray(entry[name], dtype=float).reshape(-1)
    except KeyError:
        raise RecordError(f"{where}: missing field {name!r}") from None
    except (TypeError, ValueError):
        raise RecordError(f"{where}: {name} must be a list of seconds, got {entry[name]!r}") from None
    return values


def pointing_record(entry, dataset: str, where: str) -> PointingRecord:
    """One ``full_annotations.pkl`` entry -> :class:`PointingRecord`; errors name ``where`` and the field."""
    segment_field, seconds_field = dataset_fields(dataset)
    if not isinstance(entry, dict):
        raise RecordError(f"{where}: a record must be a dict, got {type(entry).__name__}")
    missing = [f for f in ("video_id", "video_fname", "caption", "pts", "fps", "width", "height", segment_field,
                           seconds_field, "segment_bboxes") if f not in entry]
    if missing:
        other = [name for name, (seg, _) in POINTING_DATASETS.items() if seg in entry and name != dataset]
        hint = f" (it holds {POINTING_DATASETS[other[0]][0]!r}: is it --dataset {other[0]}?)" if other else ""
        raise RecordError(f"{where}: missing field(s) {missing}{hint}")
    pts = _number_list(entry, "pts", where)
    if pts.size == 0:
        raise RecordError(f"{where}: pts is empty (the segment has no frame timestamps)")
    seconds = _number_list(entry, seconds_field, where)
    boxes, has_box = gt_boxes(entry["segment_bboxes"], where)
    try:
        fps, width, height = float(entry["fps"]), int(entry["width"]), int(entry["height"])
    except (TypeError, ValueError):
        raise RecordError(f"{where}: fps, width and height must be numbers, got {entry['fps']!r}, "
                          f"{entry['width']!r}, {entry['height']!r}") from None
    if not fps > 0 or width <= 0 or height <= 0:
        raise RecordError(f"{where}: fps, width and height must be positive, got {fps}, {width}, {height}")
    return PointingRecord(
        key=f"{entry['video_id']}_{entry[segment_field]}", video_id=str(entry["video_id"]),
        video_fname=str(entry["video_fname"]), caption=str(entry["caption"]), pts=pts, target_seconds=seconds,
        fps=fps, width=width, height=height, boxes=boxes, has_box=has_box)


def load_pointing_annotations(path: str | Path) -> list:
    """The raw list of ``full_annotations.pkl`` (restricted unpickler: plain containers and numpy only)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: pointing annotations not found")
    data = safe_load(path)
    if not isinstance(data, (list, tuple)):
        raise RecordError(f"{path}: expected a list of segment records, got {type(data).__name__}")
    return list(data)


def read_pointing_records(path: str | Path, dataset: str) -> list[PointingRecord]:
    """All segments of a ``full_annotations.pkl`` as :class:`PointingRecord`, in file order."""
    return [pointing_record(entry, dataset, f"{path}: record {i}")
            for i, entry in enumerate(load_pointing_annotations(path))]


def sample_timestamps(pts, fps: float, target_fps: float = POINTING_FPS) -> np.ndarray:
    """Every ``int(fps / target_fps)``-th timestamp of ``pts``, plus the last when the stride skips it.

    A video slower than ``target_fps`` (stride 0, where the released script fails) keeps every timestamp.
    """
    pts = np.asarray(pts, dtype=float).reshape(-1)
    stride = max(int(fps / target_fps), 1)
    sampled = pts[::stride]
    if pts.size and not np.any(sampled == pts[-1]):
        sampled = np.append(sampled, pts[-1])
    return sampled


def closest_samples(sampled, seconds) -> np.ndarray:
    """Index into ``sampled`` of the timestamp nearest each of ``seconds`` (the first on a tie)."""
    sampled = np.asarray(sampled, dtype=float).reshape(1, -1)
    seconds = np.asarray(seconds, dtype=float).reshape(-1, 1)
    if sampled.size == 0:
        raise ValueError("no sampled timestamps to choose from")
    return np.argmin(np.abs(sampled - seconds), axis=1)


def frame_at_seconds(seconds, fps: float) -> np.ndarray:
    """Source frame index shown at each timestamp: the first frame presented at or after it, as
    FFmpeg's accurate seek (``-ss t`` before the input) picks it; a thousandth of a frame of
    tolerance absorbs timestamps rounded in the annotations."""
    frames = np.ceil(np.asarray(seconds, dtype=float) * float(fps) - 1e-3)
    return np.maximum(frames, 0).astype(np.int64)


__all__ = ["POINTING_DATASETS", "POINTING_FPS", "PointingRecord", "closest_samples", "dataset_fields",
           "frame_at_seconds", "gt_boxes", "is_empty_box", "load_pointing_annotations", "pointing_record",
           "read_pointing_records", "sample_timestamps"]
