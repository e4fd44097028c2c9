"""The grounding metrics' inputs: one frame's boxes (:class:`FrameBoxes`), read from a ground-truth
record or from one clip of the predictions format, checked where they are built; a malformed input
is a :class:`GroundingInputError` naming the source, clip, frame and field."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np


class GroundingInputError(ValueError):
    """Ground truth or predictions are malformed; the message names the source, clip, frame and field."""


@dataclass
class FrameBoxes:
    """The boxes of one frame of one clip: pixel ``xyxy`` ``(n, 4)``, one phrase per box, optional scores
    and optional masks (one COCO RLE or ``None`` per box)."""

    frame: int
    boxes: np.ndarray
    labels: list[str]
    scores: np.ndarray | None = None
    masks: list | None = None

    def __post_init__(self) -> None:
        where = f"frame {self.frame}"
        if isinstance(self.frame, (bool, np.bool_)) or not float(self.frame).is_integer() or self.frame < 0:
            raise GroundingInputError(f"{where}: 'frame' must be a non-negative integer source-frame index")
        self.frame = int(self.frame)
        boxes = np.asarray(self.boxes if len(self.boxes) else np.zeros((0, 4)), dtype=np.float64)
        if boxes.ndim != 2 or boxes.shape[1] != 4:
            raise GroundingInputError(f"{where}: 'boxes' must be a list of [x1, y1, x2, y2], got shape {boxes.shape}")
        if not np.isfinite(boxes).all():
            raise GroundingInputError(f"{where}: 'boxes' has a non-finite coordinate")
        self.boxes = boxes
        self.labels = [str(l) for l in self.labels]
        if len(self.labels) != len(boxes):
            raise GroundingInputError(f"{where}: {len(boxes)} boxes but {len(self.labels)} labels")
        if self.scores is not None:
            scores = np.asarray(self.scores, dtype=np.float64).reshape(-1)
            if len(scores) != len(boxes):
                raise GroundingInputError(f"{where}: {len(boxes)} boxes but {len(scores)} scores")
            if not np.isfinite(scores).all():
                raise GroundingInputError(f"{where}: 'scores' has a non-finite value")
            self.scores = scores
        if self.masks is not None:
            self.masks = list(self.masks)
            if len(self.masks) != len(boxes):
                raise GroundingInputError(f"{where}: {len(boxes)} boxes but {len(self.masks)} masks")


def frames_from_record(record) -> list[FrameBoxes]:
    """GT of one :class:`~formats.records.GroundedRecord`: every annotated frame, empty ones too (with
    the record's masks when it has them)."""
    masks = getattr(record, "masks", None) or [None] * len(record.bboxes)
    return [FrameBoxes(int(f), b, list(l), None, m)
            for f, b, l, m in zip(record.frame_indices, record.bboxes, record.labels, masks)]


def ground_truth_from_records(records: Iterable) -> dict[str, list[FrameBoxes]]:
    """``{record.key: frames}`` for :func:`evaluate_grounding`; duplicate keys are an error."""
    out: dict[str, list[FrameBoxes]] = {}
    for record in records:
        if record.key in out:
            raise GroundingInputError(f"ground truth: clip '{record.key}' appears twice")
        out[record.key] = frames_from_record(record)
    return out


def frames_from_prediction(prediction: Mapping[str, Any], key: str = "?", source: str = "<memory>") -> list[FrameBoxes]:
    """One clip of the prediction format: ``{"frames": [{"frame", "boxes", "labels", "scores"[, "masks"]}]}``."""
    where = f"{source}, clip '{key}'"
    if not isinstance(prediction, Mapping) or "frames" not in prediction:
        raise GroundingInputError(f"{where}: expected a dict with a 'frames' list")
    frames = prediction["frames"]
    if not isinstance(frames, (list, tuple)):
        raise GroundingInputError(f"{where}: 'frames' must be a list, got {type(frames).__name__}")
    out = []
    for i, frame in enumerate(frames):
        if not isinstance(frame, Mapping) or "frame" not in frame:
            raise GroundingInputError(f"{where}: frames[{i}] must be a dict with a 'frame' index")
        try:
            out.append(FrameBoxes(frame["frame"], frame.get("boxes", []), frame.get("labels", []), frame.get("scores"),
                                  frame.get("masks")))
        except (GroundingInputError, ValueError, TypeError) as err:
            raise GroundingInputError(f"{where}: frames[{i}]: {err}") from None
    return out


def predictions_from_dict(data: Mapping[str, Mapping[str, Any]],
                          source: str = "<memory>") -> dict[str, list[FrameBoxes]]:
    """The whole prediction file ``{clip key: prediction}`` -> ``{clip key: frames}``."""
    if not isinstance(data, Mapping):
        raise GroundingInputError(f"{source}: expected a dict of clip key -> prediction, got {type(data).__name__}")
    return {str(k): frames_from_prediction(v, str(k), source) for k, v in data.items()}
