"""Grounding metrics of grounded video captioning: AP50, mIoU and recall, each at video
level (per video, then averaged over videos) and frame level (pooled over all frames of all videos).

Plain functions on plain inputs (numpy boxes, string phrases), in torchmetrics' functional shape:
:func:`grounding_update` reduces a batch of clips to a :class:`GroundingState` (sums per metric and
a compact record per counted detection), :func:`grounding_merge` adds states and
:func:`grounding_compute` gives the scores; :func:`evaluate_grounding` is the three on one set.
The torchmetrics wrappers and the offline evaluator call these. Their inputs, one frame's boxes, are
:mod:`metrics.functional.frame_boxes`; the flat tables and block IoU they run on are
:mod:`metrics.functional.iou_blocks`. Everything after gathering the per-frame arrays is
vectorised: frames are processed together in padded blocks, and the only
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

import math
import os
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from formats.mask_rle import mask_areas
from metrics.functional.frame_boxes import FrameBoxes
from metrics.functional.iou_blocks import Boxes, flatten, image_starts, padded_blocks, pair_iou
from metrics.text_encoder import PhraseVocabulary, build_text_encoder, vocabulary_of

SCORE_SOURCES = ("constant", "objectness")
LEVELS = ("video", "frame")
METRICS = ("AP50", "mIoU", "recall")
IOU_KINDS = ("box", "mask")
# pycocotools' Params: 101 recall points, area range "all" (a detection outside it is ignored).
RECALL_THRESHOLDS = np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1, endpoint=True)
AREA_RANGE_ALL = (0.0 ** 2, 1e5 ** 2)


# ---------------------------------------------------------------- AP50

def _match_detections(gt: Boxes, det_image, pred: Boxes, keep: np.ndarray, n_images: int,
                      iou_threshold: float) -> np.ndarray:
    """COCOeval's per-image greedy matching; ``det_*`` sorted by (image, rank). Returns TP flags.

    In rank order, each detection takes the unmatched GT of highest IoU ``>= t``; on a tie in IoU
    the LAST such GT wins (COCOeval replaces its candidate when ``iou >= best``).
    """
    threshold = min(iou_threshold, 1 - 1e-10)
    g_start, g_count = image_starts(gt.image, n_images)
    d_start, d_count = image_starts(det_image, n_images)
    tp = np.zeros(len(det_image), dtype=bool)
    both = np.flatnonzero((g_count > 0) & (d_count > 0))
    for _, g_idx, d_idx in padded_blocks(both, g_start, g_count, d_start, d_count):
        iou = pair_iou(g_idx, d_idx, gt, pred, col_sel=keep)  # (n, G, D)
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
    start, count = image_starts(group, n_groups)
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


def _detections(gt: Boxes, pred: Boxes, n_images: int, score_source, iou_threshold, max_dets):
    """COCOeval's counted detections: ``(image, rank in image, score, matched)`` arrays."""
    score = np.ones(len(pred.image)) if score_source == "constant" else pred.scores
    # Per image: highest score first (ties keep the frame's order), only the first max_dets count.
    by_rank = np.lexsort((pred.order, -score, pred.image))
    start, _ = image_starts(pred.image, n_images)
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

def _greedy_pairs(gt: Boxes, pred: Boxes, n_images: int, rules: Sequence) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per image: repeatedly take the remaining (GT, prediction) pair of highest IoU while a rule accepts.

    Each rule ``accept(iou, gt_index, pred_index)`` (flat indices, one entry per still-active frame)
    says whether the pair counts; its first refusal stops that frame. The rules run on the same
    IoU blocks. Returns per rule and image the number of accepted pairs and the sum of their IoUs.
    Ties pick the first pair in (GT, prediction) order.
    """
    g_start, g_count = image_starts(gt.image, n_images)
    p_start, p_count = image_starts(pred.image, n_images)
    out = [(np.zeros(n_images, dtype=np.int64), np.zeros(n_images, dtype=np.float64)) for _ in rules]
    both = np.flatnonzero((g_count > 0) & (p_count > 0))
    for images, g_idx, p_idx in padded_blocks(both, g_start, g_count, p_start, p_count):
        block_iou = pair_iou(g_idx, p_idx, gt, pred)  # (n, G, P), -1 on padding
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
    image_video, image_frame, gt_boxes, pred_boxes = flatten(gt, pred, keys, need_scores,
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
