"""Scores of a referring set with known answers (:mod:`referring.synthetic_set`).

Per query, the predicted tube is the query's referent kept by the objectness on each grid frame.

* **accuracy** (queries that name an object): the tube grounds the named object. Each predicted box
  goes to the clip's object it overlaps most (IoU >= 0.5, else to none); the query is right when the
  object most of its boxes go to is the named one. A tube with no box is wrong.
* **mIoU** (the same queries): the tube's vIoU with the object's true tube, as TubeDETR defines it for
  VidSTG: the sum of the box IoUs over the frames both hold, over the number of frames either holds.
* **rejection** (distractors, which name a colour and shape the clip lacks): the share of distractors
  with no box on any frame; **frame rejection**: the share of their (query, frame) pairs without a box.
"""
from __future__ import annotations

from core.box_ops import numpy_box_iou_pairwise

from collections import Counter
from typing import Mapping, Sequence

import numpy as np

from formats.records import GroundedRecord
from referring.synthetic_set import ReferringQuery

MATCH_IOU = 0.5


def true_tubes(record: GroundedRecord) -> dict[str, dict[int, np.ndarray]]:
    """Each phrase of the clip -> source frame -> its (union) box, on the frames it is present."""
    boxes, present = record.phrase_boxes()
    frames = record.frame_indices.tolist()
    return {phrase: {frames[f]: boxes[f, j] for f in np.flatnonzero(present[:, j])}
            for j, phrase in enumerate(record.phrases)}


def tube_viou(predicted: Mapping[int, np.ndarray], truth: Mapping[int, np.ndarray]) -> float:
    """TubeDETR's vIoU of two tubes (frame -> xyxy box); two empty tubes score 1."""
    union = set(predicted) | set(truth)
    if not union:
        return 1.0
    both = sorted(set(predicted) & set(truth))
    if not both:
        return 0.0
    ious = numpy_box_iou_pairwise(np.array([predicted[f] for f in both]), np.array([truth[f] for f in both]))
    return float(ious.sum() / len(union))


def grounded_object(predicted: Mapping[int, np.ndarray], tubes: Mapping[str, Mapping[int, np.ndarray]]) -> str | None:
    """The clip's object most of the predicted boxes overlap best (IoU >= 0.5); None when none does."""
    votes: Counter = Counter()
    for frame, box in predicted.items():
        best, best_iou = None, MATCH_IOU
        for phrase, tube in tubes.items():
            if frame in tube:
                iou = float(numpy_box_iou_pairwise(np.asarray(box), tube[frame]))
                if iou >= best_iou:
                    best, best_iou = phrase, iou
        votes[best] += 1
    if not votes:
        return None
    (winner, _), = votes.most_common(1)
    return winner


def score_referring_set(records: Mapping[str, GroundedRecord], queries: Sequence[ReferringQuery],
                        tubes_of: Mapping[int, Mapping[int, np.ndarray]]) -> dict[str, float]:
    """The set's figures from ``tubes_of[i]``, the predicted tube (frame -> box) of ``queries[i]``."""
    correct, vious, rejected, frame_rejected, frames_asked = [], [], [], 0, 0
    truths = {key: true_tubes(record) for key, record in records.items()}
    for i, query in enumerate(queries):
        predicted = {int(f): np.asarray(b, dtype=np.float64) for f, b in tubes_of.get(i, {}).items()}
        tubes = truths[query.clip]
        if query.target is None:
            rejected.append(not predicted)
            grid = len(records[query.clip].frame_indices)
            frames_asked += grid
            frame_rejected += grid - len(predicted)
            continue
        correct.append(grounded_object(predicted, tubes) == query.target)
        vious.append(tube_viou(predicted, tubes[query.target]))
    return {"accuracy": float(np.mean(correct)) if correct else float("nan"),
            "mIoU": float(np.mean(vious)) if vious else float("nan"),
            "rejection": float(np.mean(rejected)) if rejected else float("nan"),
            "frame_rejection": frame_rejected / frames_asked if frames_asked else float("nan"),
            "object_queries": len(correct), "distractor_queries": len(rejected), "clips": len(records)}


def oracle_tubes(records: Mapping[str, GroundedRecord], queries: Sequence[ReferringQuery]) -> dict[int, dict]:
    """The true answer of every query (the scores' ceiling: 1.0 each)."""
    truths = {key: true_tubes(record) for key, record in records.items()}
    return {i: dict(truths[q.clip][q.target]) if q.target is not None else {} for i, q in enumerate(queries)}


def first_phrase_tubes(records: Mapping[str, GroundedRecord], queries: Sequence[ReferringQuery]) -> dict[int, dict]:
    """A query-blind floor: every query answered with the true tube of the caption's first phrase."""
    truths = {key: true_tubes(record) for key, record in records.items()}
    return {i: dict(truths[q.clip][records[q.clip].phrases[0]]) for i, q in enumerate(queries)}


__all__ = ["first_phrase_tubes", "grounded_object", "oracle_tubes", "score_referring_set", "true_tubes", "tube_viou"]
