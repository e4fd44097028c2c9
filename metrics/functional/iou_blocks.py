"""Boxes of many frames as flat tables, and their pairwise IoU in padded blocks.

:func:`flatten` numbers the (clip, frame) images of both sides and sorts every box by image;
:func:`padded_blocks` groups images of similar box counts into padded index blocks, and
:func:`block_iou` / :func:`block_mask_iou` give each block's IoU at once (numpy, float64 as
pycocotools), so the matching steps of the grounding metrics run vectorised over frames.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Iterator, Mapping, Sequence

import numpy as np

from formats.mask_rle import mask_iou_matrix
from metrics.functional.frame_boxes import FrameBoxes, GroundingInputError
from metrics.text_encoder import PhraseVocabulary

BLOCK_BUDGET = 1 << 21  # padded (frames x rows x cols) elements per block: bounds memory


@dataclass
class Boxes:
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


def flatten(gt, pred, keys, need_scores: bool, vocabulary: PhraseVocabulary | None, with_masks: bool = False):
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
        return Boxes(image[sort], order[sort], boxes[sort], None if labels is None else labels[sort],
                      None if scores is None else scores[sort], None if masks is None else masks[sort])

    return (image_video, image_frame, boxes_of(g_img_of_frame, g_count, g_boxes, g_labels, None, g_masks),
            boxes_of(p_img_of_frame, p_count, p_boxes, p_labels, p_scores, p_masks))


def image_starts(image: np.ndarray, n_images: int) -> tuple[np.ndarray, np.ndarray]:
    """Per image: index of its first item in ``image``-sorted arrays, and its item count."""
    count = np.bincount(image, minlength=n_images)
    return np.cumsum(count) - count, count


def padded_blocks(images: np.ndarray, row_start, row_count, col_start, col_count) -> Iterator:
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
        step = max(1, BLOCK_BUDGET // (rows * cols))
        for s in range(0, len(group), step):
            chunk = group[s:s + step]
            r, c = np.arange(rows), np.arange(cols)
            row_idx = np.where(r < row_count[chunk, None], row_start[chunk, None] + r, -1)
            col_idx = np.where(c < col_count[chunk, None], col_start[chunk, None] + c, -1)
            yield chunk, row_idx, col_idx


def block_iou(row_idx: np.ndarray, col_idx: np.ndarray, row_boxes: np.ndarray, col_boxes: np.ndarray) -> np.ndarray:
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


def block_mask_iou(row_idx: np.ndarray, col_idx: np.ndarray, row_masks: np.ndarray,
                    col_masks: np.ndarray) -> np.ndarray:
    """:func:`block_iou` for masks: IoU ``(n, R, C)`` of the RLEs, 0 where either side has no mask,
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


def pair_iou(row_idx, col_idx, rows: Boxes, cols: Boxes, row_sel=None, col_sel=None) -> np.ndarray:
    """Box IoU, or mask IoU when both sides carry masks (``row_sel``/``col_sel`` re-index ``cols``)."""
    col_boxes = cols.boxes if col_sel is None else cols.boxes[col_sel]
    if rows.masks is None:
        return block_iou(row_idx, col_idx, rows.boxes, col_boxes)
    return block_mask_iou(row_idx, col_idx, rows.masks, cols.masks if col_sel is None else cols.masks[col_sel])
