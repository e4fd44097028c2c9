"""VidSTG metrics as TubeDETR's ``vidstg_eval.py`` computes them: m_vIoU, vIoU@0.3, vIoU@0.5 and
m_tIoU per sentence type, and the spatial-only variant with the ground-truth temporal span.

Frame grid (TubeDETR's, the default): over a sentence's used segment ``[start, end)``, the
frames where ``int(f * 5 / fps)`` increases (an absolute 5-fps grid, starting at ``start``); a
grid longer than 200 frames is subsampled to 200 (``grid[j * n // 200]``). ``grid="record"``
evaluates the frames of the in-memory record instead (the frames the model was given).

Per sentence, with ``T_gt`` the grid frames inside the ground-truth tube and the predicted span
``[s, e)``: ``vIoU = sum of IoU over T_gt frames inside [max start, min end) / number of grid
frames inside [min start, max end)``; ``vIoU@t`` is the fraction of sentences with ``vIoU > t``
(strict). The spatial-only variant (the GROVE paper's m_vIoU, "ground-truth temporal
localisation") is the IoU averaged over ``T_gt``; ``tIoU`` is the frame-span IoU of the two spans.

Inputs: plain data (:class:`VidSTGSentence` and, per sentence, predicted boxes by source frame
with an optional predicted span), in-memory records (:func:`evaluate_vidstg`), or the annotation
file (``grove vidstg``, every frame of each tube read from the file). Choices where
the evaluator would fail instead (documented): a tube frame of the grid without a ground-truth
box is left out of ``T_gt``; a ``T_gt`` frame without a predicted box scores IoU 0 (both are
counted in the report); without a predicted span the span is that of the grid frames where a box
is predicted (a model without objectness predicts every frame it is given, so with clips cut to
the tube this is the tube); in each frame the highest-scored predicted box is taken (the first on
ties or without scores).
"""
from __future__ import annotations

from core.box_ops import box_iou_pairwise

from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import torch

from formats.frame_grids import MAX_FRAMES, SAMPLE_FPS, tubedetr_frame_grid
from metrics.functional.frame_boxes import frames_from_prediction
from metrics.protocols.vidstg_annotations import VidSTGSentence

SENTENCE_TYPES = ("declarative", "interrogative")
THRESHOLDS = (0.3, 0.5)
GRIDS = ("tubedetr", "record")


def predicted_boxes(prediction: Mapping[str, Any] | None, key: str, source: str) -> dict[int, np.ndarray]:
    """Frame -> the frame's highest-scored predicted box (prediction JSON format)."""
    if prediction is None:
        return {}
    out = {}
    for f in frames_from_prediction(prediction, key=key, source=source):
        if len(f.boxes):
            out[f.frame] = f.boxes[0 if f.scores is None else int(np.argmax(f.scores))]
    return out


def sentence_scores(sentence: VidSTGSentence, predicted: Mapping[int, Sequence[float]],
                    span: Sequence[int] | None = None, sample_fps: float = SAMPLE_FPS,
                    max_frames: int = MAX_FRAMES) -> dict[str, float]:
    """``vIoU``, ``gt_vIoU`` and ``tIoU`` of one sentence, plus the frames left out / scored 0."""
    grid = (np.asarray(sentence.frames, dtype=np.int64) if sentence.frames is not None
            else tubedetr_frame_grid(sentence.fps, *sentence.segment, sample_fps, max_frames))
    t0, t1 = int(sentence.tube[0]), int(sentence.tube[1])
    in_tube = grid[(grid >= t0) & (grid < t1)]
    has_gt = np.array([int(f) in sentence.boxes for f in in_tube.tolist()], dtype=bool)
    gt_frames = in_tube[has_gt]
    n = len(gt_frames)
    gt = np.array([sentence.boxes[int(f)] for f in gt_frames.tolist()], dtype=np.float64).reshape(n, 4)
    has_pred = np.array([int(f) in predicted for f in gt_frames.tolist()], dtype=bool)
    pred = np.array([predicted[int(f)] if p else [0.0, 0.0, 0.0, 0.0]
                     for f, p in zip(gt_frames.tolist(), has_pred.tolist())], dtype=np.float64).reshape(n, 4)
    iou = box_iou_pairwise(torch.from_numpy(pred), torch.from_numpy(gt)).numpy() * has_pred
    if span is None:
        on_grid = [f for f in grid.tolist() if f in predicted]
        span = (min(on_grid), max(on_grid) + 1) if on_grid else None
    if span is None:  # nothing predicted: empty intersection, the union is the tube
        viou, tiou = 0.0, 0.0
    else:
        s, e = int(span[0]), int(span[1])
        inter_frames = (gt_frames >= max(s, t0)) & (gt_frames < min(e, t1))
        union = int(((grid >= min(s, t0)) & (grid < max(e, t1))).sum())
        viou = float(iou[inter_frames].sum()) / max(union, 1)
        inter = min(e, t1) - max(s, t0)
        tiou = 0.0 if inter <= 0 else inter / ((t1 - t0) + (e - s) - inter)
    return {"vIoU": viou, "gt_vIoU": float(iou.sum()) / max(n, 1), "tIoU": float(tiou),
            "gt_frames_missing": int((~has_gt).sum()), "pred_frames_missing": int((~has_pred).sum())}


def evaluate_vidstg_sentences(sentences: Iterable[VidSTGSentence],
                              predictions: Mapping[str, Mapping[int, Sequence[float]]],
                              spans: Mapping[str, Sequence[int]] | None = None,
                              thresholds: Sequence[float] = THRESHOLDS, sample_fps: float = SAMPLE_FPS,
                              max_frames: int = MAX_FRAMES) -> dict[str, float]:
    """The VidSTG metrics from plain data: predicted boxes ``{key: {frame: xyxy}}`` and optional
    predicted spans ``{key: (start, end)}`` (frames, end exclusive).

    Keys: ``{type}_m_vIoU``, ``{type}_vIoU@{t}``, ``{type}_m_tIoU``, ``{type}_m_vIoU_gt_temporal``,
    ``{type}_vIoU@{t}_gt_temporal``, ``num_{type}`` for type in declarative, interrogative and
    ``all`` (NaN for a type without sentence), and ``num_gt_frames_missing`` /
    ``num_pred_frames_missing`` (module docstring).
    """
    items = list(sentences)
    unknown = sorted({s.sentence_type for s in items} - set(SENTENCE_TYPES))
    if unknown:
        raise ValueError(f"sentences with sentence_type {unknown}: expected one of {SENTENCE_TYPES}")
    spans = spans or {}
    rows = [sentence_scores(s, predictions.get(s.key, {}), spans.get(s.key), sample_fps, max_frames) for s in items]
    types = np.array([s.sentence_type for s in items])
    viou, gt_viou, tiou = (np.array([r[k] for r in rows], dtype=np.float64) for k in ("vIoU", "gt_vIoU", "tIoU"))
    out: dict[str, float] = {}
    for name, mask in [(t, types == t) for t in SENTENCE_TYPES] + [("all", np.ones(len(items), dtype=bool))]:
        count = int(mask.sum())
        mean = (lambda x: float(x[mask].mean())) if count else (lambda x: float("nan"))
        out[f"{name}_m_vIoU"] = mean(viou)
        for t in thresholds:
            out[f"{name}_vIoU@{t}"] = mean((viou > t).astype(float))
        out[f"{name}_m_tIoU"] = mean(tiou)
        out[f"{name}_m_vIoU_gt_temporal"] = mean(gt_viou)
        for t in thresholds:
            out[f"{name}_vIoU@{t}_gt_temporal"] = mean((gt_viou > t).astype(float))
        out[f"num_{name}"] = float(count)
    out["num_gt_frames_missing"] = float(sum(r["gt_frames_missing"] for r in rows))
    out["num_pred_frames_missing"] = float(sum(r["pred_frames_missing"] for r in rows))
    return out


def sentence_from_record(record, grid: str = "tubedetr", sample_fps: float = SAMPLE_FPS,
                         max_frames: int = MAX_FRAMES) -> VidSTGSentence:
    """A VidSTG record (``extra``: sentence_type, optional tube / used_segment) as plain data.

    With ``grid="tubedetr"`` the record must hold every frame of TubeDETR's grid inside its tube
    (records sampled on another grid cannot give TubeDETR's figure: an error says so).
    """
    if grid not in GRIDS:
        raise ValueError(f"grid must be one of {GRIDS}, got {grid!r}")
    frames = record.frame_indices
    boxes = {int(f): b[0].tolist() for f, b in zip(frames, record.bboxes) if len(b)}
    tube = record.extra.get("tube")
    if tube is None:
        tube = (min(boxes), max(boxes) + 1) if boxes else (int(frames[0]), int(frames[0]))
    segment = record.extra.get("used_segment") or (record.clip_start_frame, record.clip_end_frame + 1)
    sentence = VidSTGSentence(record.key, record.extra.get("sentence_type", ""), float(record.fps),
                              (int(segment[0]), int(segment[1])), (int(tube[0]), int(tube[1])), boxes,
                              frames=frames if grid == "record" else None)
    if grid == "tubedetr":
        official = tubedetr_frame_grid(sentence.fps, *sentence.segment, sample_fps, max_frames)
        needed = official[(official >= sentence.tube[0]) & (official < sentence.tube[1])]
        absent = np.setdiff1d(needed, frames)
        if len(absent):
            raise ValueError(f"record '{record.key}': frames {absent[:5].tolist()} of TubeDETR's grid lie in the "
                             "tube but not on the record's annotation grid; evaluate the annotation file "
                             "(grove vidstg) or use grid='record'")
    return sentence


def sentence_vious(records: Sequence, predictions: Mapping[str, Mapping[str, Any]], source: str = "<memory>",
                   grid: str = "tubedetr") -> tuple[np.ndarray, np.ndarray]:
    """``(vIoU, spatial vIoU)`` per record, in the order of ``records`` (missing prediction = none)."""
    rows = []
    for r in records:
        pred = predictions.get(r.key)
        span = pred.get("span") if isinstance(pred, Mapping) else None
        rows.append(sentence_scores(sentence_from_record(r, grid), predicted_boxes(pred, r.key, source), span))
    return np.array([x["vIoU"] for x in rows]), np.array([x["gt_vIoU"] for x in rows])


def evaluate_vidstg(records: Iterable | Mapping, predictions: Mapping[str, Mapping[str, Any]],
                    thresholds: Sequence[float] = THRESHOLDS, source: str = "<memory>",
                    grid: str = "tubedetr", spans: Mapping[str, Sequence[int]] | None = None) -> dict[str, float]:
    """VidSTG metrics of predictions (the JSON format predict writes) against in-memory VidSTG
    records (``extra['sentence_type']``). The predicted temporal span of a sentence is
    ``spans[key]``, else the prediction's ``"span": [start, end)``, else that of its boxes."""
    items = list(records.values() if isinstance(records, Mapping) else records)
    sentences = [sentence_from_record(r, grid) for r in items]
    boxes = {r.key: predicted_boxes(predictions.get(r.key), r.key, source) for r in items}
    given = {k: p["span"] for k, p in predictions.items() if isinstance(p, Mapping) and p.get("span") is not None}
    return evaluate_vidstg_sentences(sentences, boxes, {**given, **(spans or {})}, thresholds)

