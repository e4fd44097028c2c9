"""Grounding metrics of grounded video captioning: AP50, mIoU and recall, each at video
level (per video, then averaged over videos) and frame level (pooled over all frames of all videos).

Plain functions on plain inputs (numpy boxes, string phrases); the torchmetrics wrappers and the
offline evaluator call :func:`evaluate_grounding`. Everything after gathering the per-frame arrays
is vectorised: frames are processed together in padded blocks, and the only Python loops run over
matching steps (detection rank, pairing step), over size buckets and over chunks.

Choices (documented because the public evaluator leaves them open or gets them wrong):

* A "video" is one GT clip. Clips with no GT box are excluded from video-level averages (the
  public code averages in -1 for them). Predictions for clips missing from the GT are ignored;
  GT clips missing from the predictions count as clips with no predicted box.
* AP50 is pycocotools' COCOeval bbox AP at IoU 0.5 (one category, area "all", ``max_dets`` per
  image), with one image per annotated frame. Predicted frames off the GT grid are images with no
  GT: their boxes are false positives (they are frames of the video). Images are ordered by
  (clip order in ``gt``, frame index), which fixes how tied scores rank (COCOeval's stable sort).
* mIoU of a frame is the mean IoU over the greedy pairs (not over GT boxes), 0 when nothing pairs.
* mIoU and recall pick, among equal IoUs, the first pair in (GT order, prediction order).
* All metrics are fractions in [0, 1]; NaN when no clip has a GT box.
"""
from __future__ import annotations

from core.box_ops import box_iou

import itertools
import math
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import torch

SCORE_SOURCES = ("constant", "objectness")
LEVELS = ("video", "frame")
METRICS = ("AP50", "mIoU", "recall")
# pycocotools' Params: 101 recall points, area range "all" (a detection outside it is ignored).
RECALL_THRESHOLDS = np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1, endpoint=True)
AREA_RANGE_ALL = (0.0 ** 2, 1e5 ** 2)
_BLOCK_BUDGET = 1 << 21  # padded (frames x rows x cols) elements per block: bounds memory


class GroundingInputError(ValueError):
    """Ground truth or predictions are malformed; the message names the source, clip, frame and field."""


@dataclass
class FrameBoxes:
    """The boxes of one frame of one clip: pixel ``xyxy`` ``(n, 4)``, one phrase per box, optional scores."""

    frame: int
    boxes: np.ndarray
    labels: list[str]
    scores: np.ndarray | None = None

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


# ---------------------------------------------------------------- building the inputs

def frames_from_record(record) -> list[FrameBoxes]:
    """GT of one :class:`~formats.records.GroundedRecord`: every annotated frame, empty ones too."""
    return [FrameBoxes(int(f), b, list(l)) for f, b, l in zip(record.frame_indices, record.bboxes, record.labels)]


def ground_truth_from_records(records: Iterable) -> dict[str, list[FrameBoxes]]:
    """``{record.key: frames}`` for :func:`evaluate_grounding`; duplicate keys are an error."""
    out: dict[str, list[FrameBoxes]] = {}
    for record in records:
        if record.key in out:
            raise GroundingInputError(f"ground truth: clip '{record.key}' appears twice")
        out[record.key] = frames_from_record(record)
    return out


def frames_from_prediction(prediction: Mapping[str, Any], key: str = "?", source: str = "<memory>") -> list[FrameBoxes]:
    """One clip of the prediction format: ``{"frames": [{"frame", "boxes", "labels", "scores"}]}``."""
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
            out.append(FrameBoxes(frame["frame"], frame.get("boxes", []), frame.get("labels", []), frame.get("scores")))
        except (GroundingInputError, ValueError, TypeError) as err:
            raise GroundingInputError(f"{where}: frames[{i}]: {err}") from None
    return out


def predictions_from_dict(data: Mapping[str, Mapping[str, Any]],
                          source: str = "<memory>") -> dict[str, list[FrameBoxes]]:
    """The whole prediction file ``{clip key: prediction}`` -> ``{clip key: frames}``."""
    if not isinstance(data, Mapping):
        raise GroundingInputError(f"{source}: expected a dict of clip key -> prediction, got {type(data).__name__}")
    return {str(k): frames_from_prediction(v, str(k), source) for k, v in data.items()}


# ---------------------------------------------------------------- flat tables

@dataclass
class _Boxes:
    """All boxes of one side, sorted by image then by their order in the frame."""

    image: np.ndarray   # (n,) image index
    order: np.ndarray   # (n,) position in its frame's list
    boxes: np.ndarray   # (n, 4) float64 xyxy
    labels: np.ndarray  # (n,) str
    scores: np.ndarray | None


def _frame_table(clips: Mapping[str, Sequence[FrameBoxes]], keys: Sequence[str], side: str):
    """Per-frame (clip index, frame) arrays plus the concatenated boxes of ``keys``' clips."""
    frames = [(v, f) for v, key in enumerate(keys) for f in clips[key]]
    video = np.fromiter((v for v, _ in frames), dtype=np.int64, count=len(frames))
    frame = np.fromiter((f.frame for _, f in frames), dtype=np.int64, count=len(frames))
    count = np.fromiter((len(f.labels) for _, f in frames), dtype=np.int64, count=len(frames))
    boxes = np.concatenate([f.boxes for _, f in frames] + [np.zeros((0, 4))])
    labels = np.asarray(list(itertools.chain.from_iterable(f.labels for _, f in frames)), dtype=str)
    if frames and any(f.scores is None for _, f in frames if len(f.labels)):
        scores = None
    else:
        scores = np.concatenate([f.scores if f.scores is not None else np.zeros(0) for _, f in frames] + [np.zeros(0)])
    # A frame listed twice would make "order in the frame" ambiguous.
    pair = video * (frame.max(initial=0) + 1) + frame
    _, first, counts = np.unique(pair, return_index=True, return_counts=True)
    if (counts > 1).any():
        i = first[np.argmax(counts > 1)]
        raise GroundingInputError(f"{side}: clip '{keys[video[i]]}' lists frame {frame[i]} more than once")
    return video, frame, count, boxes, labels, scores


def _flatten(gt, pred, keys, need_scores: bool):
    """Images = (clip, frame) pairs of both sides, numbered in (clip order, frame) order."""
    g_video, g_frame, g_count, g_boxes, g_labels, _ = _frame_table(gt, keys, "ground truth")
    position = {k: v for v, k in enumerate(keys)}
    present = [k for k in keys if k in pred]
    p_map = np.asarray([position[k] for k in present], dtype=np.int64)
    p_video, p_frame, p_count, p_boxes, p_labels, p_scores = _frame_table(pred, present, "predictions")
    p_video = p_map[p_video] if len(p_video) else p_video
    if need_scores and p_scores is None:
        raise GroundingInputError("predictions: score_source='objectness' needs 'scores' for every frame with boxes")

    stride = max(g_frame.max(initial=0), p_frame.max(initial=0)) + 1
    image_key, inverse = np.unique(np.concatenate([g_video * stride + g_frame, p_video * stride + p_frame]),
                                   return_inverse=True)
    image_video = image_key // stride
    g_img_of_frame, p_img_of_frame = inverse[:len(g_frame)], inverse[len(g_frame):]

    def boxes_of(img_of_frame, count, boxes, labels, scores):
        image = np.repeat(img_of_frame, count)
        order = np.arange(len(image)) - np.repeat(np.cumsum(count) - count, count)
        sort = np.lexsort((order, image))  # frames of a clip may come in any order
        return _Boxes(image[sort], order[sort], boxes[sort], labels[sort], None if scores is None else scores[sort])

    return (image_video, boxes_of(g_img_of_frame, g_count, g_boxes, g_labels, None),
            boxes_of(p_img_of_frame, p_count, p_boxes, p_labels, p_scores))


def _starts(image: np.ndarray, n_images: int) -> tuple[np.ndarray, np.ndarray]:
    """Per image: index of its first item in ``image``-sorted arrays, and its item count."""
    count = np.bincount(image, minlength=n_images)
    return np.cumsum(count) - count, count


def _padded_blocks(images: np.ndarray, row_start, row_count, col_start, col_count) -> Iterator:
    """Padded index blocks ``(images (n,), rows (n, R), cols (n, C))`` with -1 padding.

    Images are bucketed by the bit length of their row and column counts, so padding wastes at
    most 4x, and chunked so a block's ``n * R * C`` stays within the budget.
    """
    if len(images) == 0:
        return
    bucket = np.frexp(row_count[images].astype(np.float64))[1] * 64 + np.frexp(col_count[images].astype(np.float64))[1]
    order = np.argsort(bucket, kind="stable")
    for group in np.split(images[order], np.flatnonzero(np.diff(bucket[order])) + 1):
        rows, cols = int(row_count[group].max()), int(col_count[group].max())
        step = max(1, _BLOCK_BUDGET // (rows * cols))
        for s in range(0, len(group), step):
            chunk = group[s:s + step]
            r, c = np.arange(rows), np.arange(cols)
            row_idx = np.where(r < row_count[chunk, None], row_start[chunk, None] + r, -1)
            col_idx = np.where(c < col_count[chunk, None], col_start[chunk, None] + c, -1)
            yield chunk, row_idx, col_idx


def _block_iou(row_idx: np.ndarray, col_idx: np.ndarray, row_boxes: np.ndarray, col_boxes: np.ndarray) -> np.ndarray:
    """IoU ``(n, R, C)`` in float64 (as pycocotools); -1 on padding so it never wins a max."""
    a = torch.from_numpy(row_boxes[np.maximum(row_idx, 0)])
    b = torch.from_numpy(col_boxes[np.maximum(col_idx, 0)])
    iou = box_iou(a, b).numpy()
    return np.where((row_idx >= 0)[:, :, None] & (col_idx >= 0)[:, None, :], iou, -1.0)


# ---------------------------------------------------------------- AP50

def _match_detections(gt: _Boxes, det_image, det_boxes, n_images: int, iou_threshold: float) -> np.ndarray:
    """COCOeval's per-image greedy matching; ``det_*`` sorted by (image, rank). Returns TP flags.

    In rank order, each detection takes the unmatched GT of highest IoU ``>= t``; on a tie in IoU
    the LAST such GT wins (COCOeval replaces its candidate when ``iou >= best``).
    """
    threshold = min(iou_threshold, 1 - 1e-10)
    g_start, g_count = _starts(gt.image, n_images)
    d_start, d_count = _starts(det_image, n_images)
    tp = np.zeros(len(det_image), dtype=bool)
    both = np.flatnonzero((g_count > 0) & (d_count > 0))
    for _, g_idx, d_idx in _padded_blocks(both, g_start, g_count, d_start, d_count):
        iou = _block_iou(g_idx, d_idx, gt.boxes, det_boxes)  # (n, G, D)
        matched = g_idx < 0  # padding counts as taken
        rows = np.arange(len(g_idx))
        for rank in range(d_idx.shape[1]):
            candidate = ~matched & (iou[:, :, rank] >= threshold)
            last_best = iou.shape[1] - 1 - np.argmax(np.where(candidate, iou[:, :, rank], -np.inf)[:, ::-1], axis=1)
            hit = candidate.any(1) & (d_idx[:, rank] >= 0)
            matched[rows[hit], last_best[hit]] = True
            tp[d_idx[hit, rank]] = True
    return tp


def _grouped_average_precision(group, score, image, rank, tp, n_gt: np.ndarray) -> np.ndarray:
    """COCOeval's accumulate() for each group at once (AP per group; NaN where the group has no GT).

    Within a group detections rank by score, ties by image then rank in image (COCOeval's stable
    mergesort over images concatenated in id order).
    """
    n_groups, n_thr = len(n_gt), len(RECALL_THRESHOLDS)
    sort = np.lexsort((rank, image, -score, group))
    group, tp = group[sort], tp[sort].astype(np.float64)
    start, count = _starts(group, n_groups)
    csum_tp = np.concatenate([[0.0], np.cumsum(tp)])
    csum_fp = np.concatenate([[0.0], np.cumsum(1.0 - tp)])
    first = start[group]
    tp_sum = csum_tp[1:] - csum_tp[first]
    fp_sum = csum_fp[1:] - csum_fp[first]
    recall = tp_sum / np.maximum(n_gt[group], 1)
    precision = tp_sum / (fp_sum + tp_sum + np.spacing(1))

    # Interpolated precision = max of precision from here to the group's end. A running max over
    # the reversed array restarts per group when each value is encoded as (group rank, value rank)
    # in one integer: exact, unlike adding float offsets.
    values, value_rank = np.unique(precision, return_inverse=True)
    offset = (n_groups - 1 - group[::-1]).astype(np.int64) * len(values)
    running = np.maximum.accumulate(offset + value_rank[::-1]) - offset
    interpolated = values[running][::-1] if len(values) else precision

    # COCOeval reads precision at searchsorted(recall, thr, 'left') = #(recall < thr) within the group.
    first_thr_above = np.searchsorted(RECALL_THRESHOLDS, recall, side="right")
    below = np.bincount(group * (n_thr + 1) + first_thr_above, minlength=n_groups * (n_thr + 1))
    below = np.cumsum(below.reshape(n_groups, n_thr + 1), axis=1)[:, :n_thr]
    inside = below < count[:, None]
    position = np.where(inside, start[:, None] + below, 0)
    q = np.where(inside, interpolated[position] if len(interpolated) else 0.0, 0.0)
    ap = q.mean(axis=1)
    return np.where(n_gt > 0, ap, np.nan)


def _average_precision(gt: _Boxes, pred: _Boxes, image_video, levels, score_source, iou_threshold, max_dets):
    n_images, n_videos = len(image_video), int(image_video.max(initial=-1)) + 1
    score = np.ones(len(pred.image)) if score_source == "constant" else pred.scores
    # Per image: highest score first (ties keep the frame's order), only the first max_dets count.
    by_rank = np.lexsort((pred.order, -score, pred.image))
    start, _ = _starts(pred.image, n_images)
    image = pred.image[by_rank]
    rank = np.arange(len(image)) - start[image]
    keep = by_rank[rank < max_dets]
    det_image, det_rank, det_score, det_boxes = pred.image[keep], rank[rank < max_dets], score[keep], pred.boxes[keep]

    tp = _match_detections(gt, det_image, det_boxes, n_images, iou_threshold)
    # COCOeval ignores an unmatched detection whose (signed) w*h lies outside area range "all".
    wh = det_boxes[:, 2:] - det_boxes[:, :2]
    area = wh[:, 0] * wh[:, 1]
    counted = tp | ((area >= AREA_RANGE_ALL[0]) & (area <= AREA_RANGE_ALL[1]))
    det_image, det_rank, det_score, tp = det_image[counted], det_rank[counted], det_score[counted], tp[counted]

    out = {}
    if "video" in levels:
        n_gt = np.bincount(image_video[gt.image], minlength=n_videos)
        ap = _grouped_average_precision(image_video[det_image], det_score, det_image, det_rank, tp, n_gt)
        out["AP50"] = _nanmean(ap)
    if "frame" in levels:
        ap = _grouped_average_precision(np.zeros(len(det_image), np.int64), det_score, det_image, det_rank, tp,
                                        np.array([len(gt.image)]))
        out["AP50_frame"] = float(ap[0]) if len(gt.image) else math.nan
    return out


# ---------------------------------------------------------------- mIoU and recall

def _greedy_pairs(gt: _Boxes, pred: _Boxes, n_images: int, rules: Sequence) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per image: repeatedly take the remaining (GT, prediction) pair of highest IoU while a rule accepts.

    Each rule ``accept(iou, gt_index, pred_index)`` (flat indices, one entry per still-active frame)
    says whether the pair counts; its first refusal stops that frame. The rules run on the same
    IoU blocks. Returns per rule and image the number of accepted pairs and the sum of their IoUs.
    Ties pick the first pair in (GT, prediction) order.
    """
    g_start, g_count = _starts(gt.image, n_images)
    p_start, p_count = _starts(pred.image, n_images)
    out = [(np.zeros(n_images, dtype=np.int64), np.zeros(n_images, dtype=np.float64)) for _ in rules]
    both = np.flatnonzero((g_count > 0) & (p_count > 0))
    for images, g_idx, p_idx in _padded_blocks(both, g_start, g_count, p_start, p_count):
        block_iou = _block_iou(g_idx, p_idx, gt.boxes, pred.boxes)  # (n, G, P), -1 on padding
        cols = block_iou.shape[2]
        for accept, (n_pairs, iou_sum) in zip(rules, out):
            iou = block_iou.copy() if len(rules) > 1 else block_iou
            active = np.arange(len(images))
            for _ in range(min(iou.shape[1], cols)):
                flat = iou[active].reshape(len(active), -1)
                best = np.argmax(flat, axis=1)  # first maximum in row-major = (GT, prediction) order
                value = flat[np.arange(len(active)), best]
                g, p = best // cols, best % cols
                ok = accept(value, g_idx[active, g], p_idx[active, p])
                active, g, p, value = active[ok], g[ok], p[ok], value[ok]
                n_pairs[images[active]] += 1
                iou_sum[images[active]] += value
                iou[active, g, :] = -1.0  # remove both boxes
                iou[active, :, p] = -1.0
                if not len(active):
                    break
    return out


def _miou_and_recall(gt, pred, image_video, levels, metrics, text_encoder, iou_threshold, text_threshold):
    n_images, n_videos = len(image_video), int(image_video.max(initial=-1)) + 1
    g_count = np.bincount(gt.image, minlength=n_images)
    gt_frames = np.flatnonzero(g_count > 0)
    frame_video = image_video[gt_frames]
    frames_per_video = np.bincount(frame_video, minlength=n_videos)
    has_gt = frames_per_video > 0

    rules = {}
    if "mIoU" in metrics:
        rules["mIoU"] = lambda iou, g, p: iou > 0
    if "recall" in metrics:
        from metrics.text_encoder import build_text_encoder, encode_unique

        encoder = text_encoder if hasattr(text_encoder, "encode") else build_text_encoder(text_encoder)
        # Only predictions in frames with GT can pair; each distinct phrase is embedded once.
        pred_in_gt_frame = g_count[pred.image] > 0
        _, emb, index = encode_unique(encoder, np.concatenate([gt.labels, pred.labels[pred_in_gt_frame]]))
        emb = emb.numpy()
        g_phrase = index[:len(gt.labels)]
        p_phrase = np.zeros(len(pred.labels), dtype=np.int64)
        p_phrase[pred_in_gt_frame] = index[len(gt.labels):]

        def accept(iou, g, p):
            ok = iou >= iou_threshold
            # Few distinct (GT phrase, predicted phrase) pairs recur across frames: one dot product each.
            pair, inverse = np.unique(g_phrase[g[ok]] * len(emb) + p_phrase[p[ok]], return_inverse=True)
            cosine = np.einsum("nd,nd->n", emb[pair // len(emb)], emb[pair % len(emb)])
            ok[ok] = cosine[inverse.reshape(-1)] >= text_threshold
            return ok

        rules["recall"] = accept
    results = dict(zip(rules, _greedy_pairs(gt, pred, n_images, list(rules.values()))))

    out = {}
    if "mIoU" in results:
        n_pairs, iou_sum = results["mIoU"]
        frame_miou = np.where(n_pairs > 0, iou_sum / np.maximum(n_pairs, 1), 0.0)[gt_frames]
        if "video" in levels:
            per_video = (np.bincount(frame_video, weights=frame_miou, minlength=n_videos)[has_gt]
                         / frames_per_video[has_gt])
            out["mIoU"] = _nanmean(per_video)
        if "frame" in levels:
            out["mIoU_frame"] = _nanmean(frame_miou)
    if "recall" in results:
        matches, _ = results["recall"]
        video_matches = np.bincount(image_video, weights=matches, minlength=n_videos)
        video_gt = np.bincount(image_video[gt.image], minlength=n_videos)
        if "video" in levels:
            out["recall"] = _nanmean(video_matches[has_gt] / video_gt[has_gt])
        if "frame" in levels:
            out["recall_frame"] = float(matches.sum() / len(gt.image)) if len(gt.image) else math.nan
    return out


def _nanmean(values: np.ndarray) -> float:
    values = values[~np.isnan(values)]
    return float(values.mean()) if len(values) else math.nan


# ---------------------------------------------------------------- entry point

def evaluate_grounding(
    gt: Mapping[str, Sequence[FrameBoxes]],
    pred: Mapping[str, Sequence[FrameBoxes]],
    text_encoder=None,
    levels: Sequence[str] = LEVELS,
    score_source: str = "constant",
    iou_threshold: float = 0.5,
    text_threshold: float = 0.5,
    max_dets: int = 100,
    metrics: Sequence[str] = METRICS,
) -> dict[str, float]:
    """AP50 / mIoU / recall of predicted boxes against GT boxes, at video and/or frame level.

    ``gt`` and ``pred`` map clip keys to their frames. ``text_encoder`` is a :class:`TextEncoder`,
    a spec for :func:`~metrics.text_encoder.build_text_encoder`, or None for the MiniLM default;
    it is only used for recall. ``score_source="constant"`` scores every box 1.0 as the public
    evaluator does; ``"objectness"`` ranks by the predicted scores.

    Returns ``AP50``, ``mIoU``, ``recall`` (video level) and ``AP50_frame``, ``mIoU_frame``,
    ``recall_frame`` (frame level) for the requested levels and metrics, plus counts:
    ``num_videos`` (clips with a GT box), ``num_videos_excluded`` (clips without one),
    ``num_gt_frames`` (frames with a GT box), ``num_gt_boxes``, ``num_pred_boxes`` (in GT clips)
    and ``num_pred_clips_ignored`` (prediction clips absent from the GT).
    """
    bad = [l for l in levels if l not in LEVELS]
    if bad or not levels:
        raise ValueError(f"levels must be a non-empty subset of {LEVELS}, got {tuple(levels)}")
    bad = [m for m in metrics if m not in METRICS]
    if bad:
        raise ValueError(f"metrics must be a subset of {METRICS}, got {tuple(metrics)}")
    if score_source not in SCORE_SOURCES:
        raise ValueError(f"score_source must be one of {SCORE_SOURCES}, got {score_source!r}")
    if int(max_dets) < 1:
        raise ValueError(f"max_dets must be >= 1, got {max_dets}")

    keys = list(gt.keys())
    need_scores = "AP50" in metrics and score_source == "objectness"
    image_video, gt_boxes, pred_boxes = _flatten(gt, pred, keys, need_scores)

    out: dict[str, float] = {}
    if "AP50" in metrics:
        out.update(_average_precision(gt_boxes, pred_boxes, image_video, levels, score_source,
                                      float(iou_threshold), int(max_dets)))
    if "mIoU" in metrics or "recall" in metrics:
        out.update(_miou_and_recall(gt_boxes, pred_boxes, image_video, levels, metrics, text_encoder,
                                    float(iou_threshold), float(text_threshold)))

    boxes_per_video = np.bincount(image_video[gt_boxes.image], minlength=len(keys))
    out.update({
        "num_videos": float((boxes_per_video > 0).sum()),
        "num_videos_excluded": float((boxes_per_video == 0).sum()),
        "num_gt_frames": float(len(np.unique(gt_boxes.image))),
        "num_gt_boxes": float(len(gt_boxes.image)),
        "num_pred_boxes": float(len(pred_boxes.image)),
        "num_pred_clips_ignored": float(sum(1 for k in pred if k not in gt)),
    })
    return out
