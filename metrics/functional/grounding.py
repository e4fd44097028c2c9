"""Grounding metrics of grounded video captioning: AP50, mIoU and recall, each at video
level (per video, then averaged over videos) and frame level (pooled over all frames of all videos).

Plain functions on plain inputs (numpy boxes, string phrases), in torchmetrics' functional shape:
:func:`grounding_update` reduces a batch of clips to a :class:`GroundingState` (sums per metric and
a compact record per counted detection), :func:`grounding_merge` adds states and
:func:`grounding_compute` gives the scores; :func:`evaluate_grounding` is the three on one set.
The torchmetrics wrappers and the offline evaluator call these. Everything after gathering the
per-frame arrays is vectorised: frames are processed together in padded blocks, and the only
Python loops run over matching steps (detection rank, pairing step), over size buckets and over
chunks. Phrases become ids of the run's :class:`~metrics.text_encoder.PhraseVocabulary`, so
each distinct phrase is embedded once a run.

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
* ``iou_kind="mask"`` scores the boxes' masks (COCO RLE, :mod:`formats.mask_rle`) instead: the same
  matching, with mask IoU in place of box IoU (COCOeval "segm" for AP50). A box without a mask
  (``None``) counts as an empty mask, whose IoU with anything is 0.
"""
from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from formats.mask_rle import mask_areas, mask_iou_matrix
from metrics.text_encoder import PhraseVocabulary, build_text_encoder, vocabulary_of

SCORE_SOURCES = ("constant", "objectness")
LEVELS = ("video", "frame")
METRICS = ("AP50", "mIoU", "recall")
IOU_KINDS = ("box", "mask")
# pycocotools' Params: 101 recall points, area range "all" (a detection outside it is ignored).
RECALL_THRESHOLDS = np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1, endpoint=True)
AREA_RANGE_ALL = (0.0 ** 2, 1e5 ** 2)
_BLOCK_BUDGET = 1 << 21  # padded (frames x rows x cols) elements per block: bounds memory


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


# ---------------------------------------------------------------- building the inputs

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


# ---------------------------------------------------------------- flat tables

@dataclass
class _Boxes:
    """All boxes of one side, sorted by image then by their order in the frame."""

    image: np.ndarray   # (n,) image index
    order: np.ndarray   # (n,) position in its frame's list
    boxes: np.ndarray   # (n, 4) float64 xyxy
    labels: np.ndarray | None  # (n,) phrase ids of the vocabulary (None when recall is not asked)
    scores: np.ndarray | None
    masks: np.ndarray | None = None  # (n,) object array of RLEs / None (only when IoU is mask IoU)


def _frame_table(clips: Mapping[str, Sequence[FrameBoxes]], keys: Sequence[str], side: str,
                 vocabulary: PhraseVocabulary | None, with_masks: bool = False):
    """Per-frame (clip index, frame) arrays plus the concatenated boxes of ``keys``' clips."""
    per_clip = [clips[key] for key in keys]
    frames = list(itertools.chain.from_iterable(per_clip))
    video = np.repeat(np.arange(len(keys), dtype=np.int64), np.fromiter(map(len, per_clip), np.int64, len(keys)))
    frame = np.fromiter((f.frame for f in frames), dtype=np.int64, count=len(frames))
    count = np.fromiter((len(f.labels) for f in frames), dtype=np.int64, count=len(frames))
    boxes = np.concatenate([f.boxes for f in frames] + [np.zeros((0, 4))])
    labels = None if vocabulary is None else vocabulary.ids(
        itertools.chain.from_iterable(f.labels for f in frames), int(count.sum()))
    if frames and any(f.scores is None for f in frames if len(f.labels)):
        scores = None
    else:
        scores = np.concatenate([f.scores if f.scores is not None else np.zeros(0) for f in frames] + [np.zeros(0)])
    masks = None
    if with_masks:
        masks = np.empty(int(count.sum()), dtype=object)
        masks[:] = list(itertools.chain.from_iterable(f.masks if f.masks is not None else [None] * len(f.labels)
                                                      for f in frames))
    # A frame listed twice would make "order in the frame" ambiguous.
    pair = video * (frame.max(initial=0) + 1) + frame
    _, first, counts = np.unique(pair, return_index=True, return_counts=True)
    if (counts > 1).any():
        i = first[np.argmax(counts > 1)]
        raise GroundingInputError(f"{side}: clip '{keys[video[i]]}' lists frame {frame[i]} more than once")
    return video, frame, count, boxes, labels, scores, masks


def _flatten(gt, pred, keys, need_scores: bool, vocabulary: PhraseVocabulary | None, with_masks: bool = False):
    """Images = (clip, frame) pairs of both sides, numbered in (clip order, frame) order.

    Returns ``(image_video, image_frame, gt boxes, predicted boxes)``."""
    g_video, g_frame, g_count, g_boxes, g_labels, _, g_masks = _frame_table(gt, keys, "ground truth", vocabulary,
                                                                            with_masks)
    position = {k: v for v, k in enumerate(keys)}
    present = [k for k in keys if k in pred]
    p_map = np.asarray([position[k] for k in present], dtype=np.int64)
    p_video, p_frame, p_count, p_boxes, p_labels, p_scores, p_masks = _frame_table(pred, present, "predictions",
                                                                                   vocabulary, with_masks)
    p_video = p_map[p_video] if len(p_video) else p_video
    if need_scores and p_scores is None:
        raise GroundingInputError("predictions: score_source='objectness' needs 'scores' for every frame with boxes")

    stride = max(g_frame.max(initial=0), p_frame.max(initial=0)) + 1
    image_key, inverse = np.unique(np.concatenate([g_video * stride + g_frame, p_video * stride + p_frame]),
                                   return_inverse=True)
    image_video, image_frame = image_key // stride, image_key % stride
    g_img_of_frame, p_img_of_frame = inverse[:len(g_frame)], inverse[len(g_frame):]

    def boxes_of(img_of_frame, count, boxes, labels, scores, masks):
        image = np.repeat(img_of_frame, count)
        order = np.arange(len(image)) - np.repeat(np.cumsum(count) - count, count)
        sort = np.lexsort((order, image))  # frames of a clip may come in any order
        return _Boxes(image[sort], order[sort], boxes[sort], None if labels is None else labels[sort],
                      None if scores is None else scores[sort], None if masks is None else masks[sort])

    return (image_video, image_frame, boxes_of(g_img_of_frame, g_count, g_boxes, g_labels, None, g_masks),
            boxes_of(p_img_of_frame, p_count, p_boxes, p_labels, p_scores, p_masks))


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
    """IoU ``(n, R, C)`` in float64 (as pycocotools); -1 on padding so it never wins a max.

    The operations of :func:`core.box_ops.box_iou` in the same order, in numpy: small blocks by the
    thousand cost less without torch's per-call dispatch.
    """
    a = row_boxes[np.maximum(row_idx, 0)][:, :, None, :]
    b = col_boxes[np.maximum(col_idx, 0)][:, None, :, :]
    wh = np.maximum(np.minimum(a[..., 2:], b[..., 2:]) - np.maximum(a[..., :2], b[..., :2]), 0)
    inter = wh[..., 0] * wh[..., 1]

    def area(box):
        return np.maximum(box[..., 2] - box[..., 0], 0) * np.maximum(box[..., 3] - box[..., 1], 0)

    union = area(a) + area(b) - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = np.where(union > 0, inter / np.maximum(union, np.finfo(np.float64).tiny), 0.0)
    return np.where((row_idx >= 0)[:, :, None] & (col_idx >= 0)[:, None, :], iou, -1.0)


def _block_mask_iou(row_idx: np.ndarray, col_idx: np.ndarray, row_masks: np.ndarray,
                    col_masks: np.ndarray) -> np.ndarray:
    """:func:`_block_iou` for masks: IoU ``(n, R, C)`` of the RLEs, 0 where either side has no mask,
    -1 on padding. pycocotools computes each frame's matrix on the runs (no decoding); the loop runs
    over the frames where both sides hold a mask."""
    rows_ok, cols_ok = row_idx >= 0, col_idx >= 0
    out = np.where(rows_ok[:, :, None] & cols_ok[:, None, :], 0.0, -1.0)
    has_row = np.zeros(row_idx.shape, dtype=bool)
    has_col = np.zeros(col_idx.shape, dtype=bool)
    has_row[rows_ok] = [m is not None for m in row_masks[row_idx[rows_ok]]]
    has_col[cols_ok] = [m is not None for m in col_masks[col_idx[cols_ok]]]
    for i in np.flatnonzero(has_row.any(1) & has_col.any(1)):
        r, c = np.flatnonzero(has_row[i]), np.flatnonzero(has_col[i])
        out[i, r[:, None], c[None, :]] = mask_iou_matrix(list(row_masks[row_idx[i, r]]),
                                                          list(col_masks[col_idx[i, c]]))
    return out


def _pair_iou(row_idx, col_idx, rows: _Boxes, cols: _Boxes, row_sel=None, col_sel=None) -> np.ndarray:
    """Box IoU, or mask IoU when both sides carry masks (``row_sel``/``col_sel`` re-index ``cols``)."""
    col_boxes = cols.boxes if col_sel is None else cols.boxes[col_sel]
    if rows.masks is None:
        return _block_iou(row_idx, col_idx, rows.boxes, col_boxes)
    return _block_mask_iou(row_idx, col_idx, rows.masks, cols.masks if col_sel is None else cols.masks[col_sel])


# ---------------------------------------------------------------- AP50

def _match_detections(gt: _Boxes, det_image, pred: _Boxes, keep: np.ndarray, n_images: int,
                      iou_threshold: float) -> np.ndarray:
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
        iou = _pair_iou(g_idx, d_idx, gt, pred, col_sel=keep)  # (n, G, D)
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


def _detections(gt: _Boxes, pred: _Boxes, n_images: int, score_source, iou_threshold, max_dets):
    """COCOeval's counted detections: ``(image, rank in image, score, matched)`` arrays."""
    score = np.ones(len(pred.image)) if score_source == "constant" else pred.scores
    # Per image: highest score first (ties keep the frame's order), only the first max_dets count.
    by_rank = np.lexsort((pred.order, -score, pred.image))
    start, _ = _starts(pred.image, n_images)
    image = pred.image[by_rank]
    rank = np.arange(len(image)) - start[image]
    keep = by_rank[rank < max_dets]
    det_image, det_rank, det_score, det_boxes = pred.image[keep], rank[rank < max_dets], score[keep], pred.boxes[keep]

    tp = _match_detections(gt, det_image, pred, keep, n_images, iou_threshold)
    # COCOeval ignores an unmatched detection whose (signed) w*h lies outside area range "all"
    # ("segm": whose mask area does; an absent mask has area 0).
    if pred.masks is None:
        wh = det_boxes[:, 2:] - det_boxes[:, :2]
        area = wh[:, 0] * wh[:, 1]
    else:
        area = np.zeros(len(keep))
        has = np.fromiter((m is not None for m in pred.masks[keep]), dtype=bool, count=len(keep))
        area[has] = mask_areas(list(pred.masks[keep][has]))
    counted = tp | ((area >= AREA_RANGE_ALL[0]) & (area <= AREA_RANGE_ALL[1]))
    return det_image[counted], det_rank[counted], det_score[counted], tp[counted]


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
        block_iou = _pair_iou(g_idx, p_idx, gt, pred)  # (n, G, P), -1 on padding
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


def _miou_and_recall_parts(gt, pred, image_video, metrics, text_encoder, vocabulary, iou_threshold, text_threshold):
    """What the means are taken over: ``mIoU``: (per video with GT, per GT frame);
    ``recall``: (per video with GT, matched pairs, GT boxes)."""
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
        # Only predictions in frames with GT can pair; each distinct phrase is embedded once a run.
        pred_in_gt_frame = g_count[pred.image] > 0
        emb = vocabulary.embed(text_encoder, np.concatenate([gt.labels, pred.labels[pred_in_gt_frame]]))
        g_phrase, p_phrase, size = gt.labels, pred.labels, len(emb)

        def accept(iou, g, p):
            ok = iou >= iou_threshold
            # Few distinct (GT phrase, predicted phrase) pairs recur across frames: one dot product each.
            pair, inverse = np.unique(g_phrase[g[ok]] * size + p_phrase[p[ok]], return_inverse=True)
            cosine = np.einsum("nd,nd->n", emb[pair // size], emb[pair % size])
            ok[ok] = cosine[inverse.reshape(-1)] >= text_threshold
            return ok

        rules["recall"] = accept
    results = dict(zip(rules, _greedy_pairs(gt, pred, n_images, list(rules.values()))))

    out = {}
    if "mIoU" in results:
        n_pairs, iou_sum = results["mIoU"]
        frame_miou = np.where(n_pairs > 0, iou_sum / np.maximum(n_pairs, 1), 0.0)[gt_frames]
        per_video = (np.bincount(frame_video, weights=frame_miou, minlength=n_videos)[has_gt]
                     / frames_per_video[has_gt])
        out["mIoU"] = (per_video, frame_miou)
    if "recall" in results:
        matches, _ = results["recall"]
        video_matches = np.bincount(image_video, weights=matches, minlength=n_videos)
        video_gt = np.bincount(image_video[gt.image], minlength=n_videos)
        out["recall"] = (video_matches[has_gt] / video_gt[has_gt], float(matches.sum()), len(gt.image))
    return out


# ---------------------------------------------------------------- update / merge / compute

@dataclass
class GroundingSettings:
    """What :func:`grounding_update` measures and how (see :func:`evaluate_grounding`)."""

    levels: tuple[str, ...] = LEVELS
    score_source: str = "constant"
    iou_threshold: float = 0.5
    text_threshold: float = 0.5
    max_dets: int = 100
    metrics: tuple[str, ...] = METRICS
    iou_kind: str = "box"

    def __post_init__(self) -> None:
        self.levels, self.metrics = tuple(self.levels), tuple(self.metrics)
        if [l for l in self.levels if l not in LEVELS] or not self.levels:
            raise ValueError(f"levels must be a non-empty subset of {LEVELS}, got {self.levels}")
        if [m for m in self.metrics if m not in METRICS]:
            raise ValueError(f"metrics must be a subset of {METRICS}, got {self.metrics}")
        if self.score_source not in SCORE_SOURCES:
            raise ValueError(f"score_source must be one of {SCORE_SOURCES}, got {self.score_source!r}")
        if self.iou_kind not in IOU_KINDS:
            raise ValueError(f"iou_kind must be one of {IOU_KINDS}, got {self.iou_kind!r}")
        if int(self.max_dets) < 1:
            raise ValueError(f"max_dets must be >= 1, got {self.max_dets}")
        self.iou_threshold, self.text_threshold = float(self.iou_threshold), float(self.text_threshold)
        self.max_dets = int(self.max_dets)


@dataclass
class GroundingState:
    """Everything the scores need, additive over batches of clips.

    ``sums``: per mean (``AP50``, ``mIoU``, ``recall`` per video; ``mIoU_frame`` per GT frame) its
    total and count. ``detections``: frame-level AP50 pools all frames, so each counted detection
    keeps (score or None when constant, matched, clip position, frame, rank in its frame); the
    precision/recall curve is ranked once in :func:`grounding_compute`, exactly as COCOeval ranks.
    """

    settings: GroundingSettings
    sums: dict[str, list] = field(default_factory=lambda: {n: [0.0, 0] for n in ("AP50", "mIoU", "recall",
                                                                                 "mIoU_frame")})
    recall_matches: float = 0.0
    gt_boxes: int = 0
    gt_frames: int = 0
    pred_boxes: int = 0
    videos: int = 0
    videos_excluded: int = 0
    detections: list = field(default_factory=list)

    def add_mean(self, name: str, values: np.ndarray) -> None:
        values = values[~np.isnan(values)]
        self.sums[name][0] += float(values.sum())
        self.sums[name][1] += len(values)


def grounding_update(gt: Mapping[str, Sequence[FrameBoxes]], pred: Mapping[str, Sequence[FrameBoxes]],
                     positions: np.ndarray | None = None, *, settings: GroundingSettings | None = None,
                     text_encoder=None, vocabulary: PhraseVocabulary | None = None) -> GroundingState:
    """The state of one batch of clips.

    ``positions`` gives each of ``gt``'s clips its place in the whole ground truth's order (which
    fixes how tied scores rank in frame-level AP50); by default the batch is the whole set.
    ``text_encoder`` is only needed for recall; ``vocabulary`` defaults to the encoder's run
    vocabulary (:func:`~metrics.text_encoder.vocabulary_of`).
    """
    settings = settings or GroundingSettings()
    state = GroundingState(settings)
    keys = list(gt)
    if not keys:
        return state
    positions = np.arange(len(keys), dtype=np.int64) if positions is None else np.asarray(positions, np.int64)
    recall = "recall" in settings.metrics
    if recall:
        text_encoder = resolve_text_encoder(text_encoder)
        vocabulary = vocabulary if vocabulary is not None else vocabulary_of(text_encoder)
    need_scores = "AP50" in settings.metrics and settings.score_source == "objectness"
    image_video, image_frame, gt_boxes, pred_boxes = _flatten(gt, pred, keys, need_scores,
                                                              vocabulary if recall else None,
                                                              settings.iou_kind == "mask")
    n_images, n_videos = len(image_video), len(keys)
    boxes_per_video = np.bincount(image_video[gt_boxes.image], minlength=n_videos)
    state.videos = int((boxes_per_video > 0).sum())
    state.videos_excluded = int((boxes_per_video == 0).sum())
    state.gt_frames = len(np.unique(gt_boxes.image))
    state.gt_boxes = len(gt_boxes.image)
    state.pred_boxes = len(pred_boxes.image)
    if "AP50" in settings.metrics:
        det_image, det_rank, det_score, tp = _detections(gt_boxes, pred_boxes, n_images, settings.score_source,
                                                         settings.iou_threshold, settings.max_dets)
        if "video" in settings.levels:
            state.add_mean("AP50", _grouped_average_precision(image_video[det_image], det_score, det_image,
                                                              det_rank, tp, boxes_per_video))
        if "frame" in settings.levels and len(det_image):
            state.detections.append((
                None if settings.score_source == "constant" else det_score.astype(np.float64),
                tp.astype(bool), positions[image_video[det_image]].astype(np.int32),
                image_frame[det_image].astype(np.int64), det_rank.astype(np.int32)))
    if "mIoU" in settings.metrics or recall:
        parts = _miou_and_recall_parts(gt_boxes, pred_boxes, image_video, settings.metrics, text_encoder,
                                       vocabulary, settings.iou_threshold, settings.text_threshold)
        if "mIoU" in parts:
            state.add_mean("mIoU", parts["mIoU"][0])
            state.add_mean("mIoU_frame", parts["mIoU"][1])
        if "recall" in parts:
            state.add_mean("recall", parts["recall"][0])
            state.recall_matches += parts["recall"][1]
    return state


def grounding_merge(total: GroundingState, part: GroundingState) -> GroundingState:
    """``total`` with ``part`` (a later batch of other clips) added in place."""
    for name, (value, count) in part.sums.items():
        total.sums[name][0] += value
        total.sums[name][1] += count
    total.recall_matches += part.recall_matches
    for name in ("gt_boxes", "gt_frames", "pred_boxes", "videos", "videos_excluded"):
        setattr(total, name, getattr(total, name) + getattr(part, name))
    total.detections.extend(part.detections)
    return total


def _frame_average_precision(state: GroundingState) -> float:
    if not state.gt_boxes:
        return math.nan
    if not state.detections:
        return 0.0
    parts = list(zip(*state.detections))
    matched = np.concatenate(parts[1])
    clip, frame, rank = np.concatenate(parts[2]), np.concatenate(parts[3]), np.concatenate(parts[4])
    score = np.ones(len(matched)) if parts[0][0] is None else np.concatenate(parts[0])
    image = clip.astype(np.int64) * (int(frame.max(initial=0)) + 1) + frame  # (clip, frame) order
    ap = _grouped_average_precision(np.zeros(len(matched), np.int64), score, image, rank, matched,
                                    np.array([state.gt_boxes]))
    return float(ap[0])


def grounding_compute(state: GroundingState, ignored_clips: int = 0) -> dict[str, float]:
    """The scores of a state (see :func:`evaluate_grounding` for the keys)."""
    def mean(name):
        total, count = state.sums[name]
        return total / count if count else math.nan

    levels, metrics = state.settings.levels, state.settings.metrics
    out: dict[str, float] = {}
    if "AP50" in metrics:
        if "video" in levels:
            out["AP50"] = mean("AP50")
        if "frame" in levels:
            out["AP50_frame"] = _frame_average_precision(state)
    if "mIoU" in metrics:
        if "video" in levels:
            out["mIoU"] = mean("mIoU")
        if "frame" in levels:
            out["mIoU_frame"] = mean("mIoU_frame")
    if "recall" in metrics:
        if "video" in levels:
            out["recall"] = mean("recall")
        if "frame" in levels:
            out["recall_frame"] = state.recall_matches / state.gt_boxes if state.gt_boxes else math.nan
    out.update({"num_videos": float(state.videos), "num_videos_excluded": float(state.videos_excluded),
                "num_gt_frames": float(state.gt_frames), "num_gt_boxes": float(state.gt_boxes),
                "num_pred_boxes": float(state.pred_boxes), "num_pred_clips_ignored": float(ignored_clips)})
    return out


def resolve_text_encoder(text_encoder):
    """An encoder instance from an instance, a :func:`~metrics.text_encoder.build_text_encoder` spec or None."""
    if text_encoder is None or isinstance(text_encoder, (str, bytes, os.PathLike)):  # str has .encode too
        return build_text_encoder(text_encoder)
    return text_encoder


class GroundingAccumulator:
    """:func:`evaluate_grounding`, fed a batch of clips at a time (the state of the torchmetrics-style
    update / merge / compute functions above, kept between calls).

    ``add(gt, pred, positions)``: ``gt``/``pred`` map the batch's clip keys to frames and
    ``positions`` gives each clip's place in the whole ground truth's order (which fixes how tied
    scores rank in frame-level AP50). ``result()`` gives the same dict as ``evaluate_grounding``.
    One phrase vocabulary serves every batch, so a phrase is embedded once per run.
    """

    def __init__(self, text_encoder=None, levels: Sequence[str] = ("video", "frame"), score_source: str = "constant",
                 iou_threshold: float = 0.5, text_threshold: float = 0.5, max_dets: int = 100,
                 metrics: Sequence[str] = ("AP50", "mIoU", "recall"), vocabulary: PhraseVocabulary | None = None,
                 iou_kind: str = "box"):
        settings = GroundingSettings(tuple(levels), score_source, iou_threshold, text_threshold, max_dets,
                                     tuple(metrics), iou_kind)
        self.text_encoder = resolve_text_encoder(text_encoder) if "recall" in settings.metrics else text_encoder
        self.vocabulary = vocabulary
        self.state = GroundingState(settings)

    def add(self, gt: Mapping[str, Sequence[FrameBoxes]], pred: Mapping[str, Sequence[FrameBoxes]],
            positions: np.ndarray) -> None:
        grounding_merge(self.state, grounding_update(gt, pred, positions, settings=self.state.settings,
                                                     text_encoder=self.text_encoder, vocabulary=self.vocabulary))

    def result(self, ignored_clips: int = 0) -> dict[str, float]:
        return grounding_compute(self.state, ignored_clips)


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
    vocabulary: PhraseVocabulary | None = None,
    iou_kind: str = "box",
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

    ``iou_kind="mask"`` pairs the boxes' masks by mask IoU instead (the mask analogues of the same
    figures; ``FrameBoxes.masks`` on both sides, ``None`` for a box without one).
    """
    settings = GroundingSettings(tuple(levels), score_source, iou_threshold, text_threshold, max_dets, tuple(metrics),
                                 iou_kind)
    state = grounding_update(gt, pred, settings=settings, text_encoder=text_encoder, vocabulary=vocabulary)
    return grounding_compute(state, ignored_clips=sum(1 for k in pred if k not in gt))
