"""GLaMM's grounded conversation generation (GCG) mask metrics: mask mIoU and mask recall, as the
``groundingLMM`` evaluation (``eval/gcg/evaluate.py``; Rasheed et al., "GLaMM: Pixel Grounding Large
Multimodal Model", CVPR 2024, Sec. 5) computes them; VideoGLaMM's video GCG applies them to frames.
An "image" here is one image, or one frame of a video.

* **mIoU**: per image, the IoU matrix of predicted x true masks; repeatedly the pair of highest IoU
  (the first in (prediction, truth) order on a tie) while that IoU is above 0, each mask used once;
  the image scores the mean of the paired IoUs (0 when nothing pairs); mIoU is the mean over all
  images, those without masks included (they score 0).
* **recall**: per image, the IoU matrix of true x predicted masks and the text similarity of their
  phrases; repeatedly the pair of highest IoU (first in (truth, prediction) order); it counts when
  its IoU >= 0.5 and its phrases' cosine similarity >= 0.5, and the first pair that fails ends the
  image. Recall = matched pairs / true phrases, pooled over all images.
* Empty masks, as the reference computes IoU (intersection / union in numpy): an empty predicted
  mask against an empty true mask has IoU NaN. In mIoU the NaN makes the image's maximum NaN, so the
  image pairs nothing and scores 0; in recall ``argmax`` picks the first NaN before any number and the
  pair counts when its phrases agree (``NaN < 0.5`` is false).

The phrase similarity of the reference is the cosine of ``bert-base-uncased`` embeddings (mean of the
last hidden state over all tokens, 512-token truncation):
``metrics.text_encoder.HFMeanPoolEncoder(<local bert-base-uncased>, max_length=512)`` is that encoder;
any :class:`~metrics.text_encoder.TextEncoder` may stand in (tests use exact matching).
The pairing runs on padded blocks of images at once (:mod:`metrics.functional.grounding`'s blocks).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from formats.mask_rle import mask_areas
from metrics.functional.grounding import resolve_text_encoder
from metrics.functional.iou_blocks import block_mask_iou, image_starts, padded_blocks
from metrics.text_encoder import PhraseVocabulary


@dataclass
class GCGImage:
    """One image (or video frame): true masks with their phrases, predicted masks with theirs (COCO RLEs)."""

    truth_masks: Sequence[dict]
    truth_labels: Sequence[str]
    predicted_masks: Sequence[dict]
    predicted_labels: Sequence[str]

    def __post_init__(self) -> None:
        if len(self.truth_masks) != len(self.truth_labels):
            raise ValueError(f"{len(self.truth_masks)} true masks but {len(self.truth_labels)} true phrases")
        if len(self.predicted_masks) != len(self.predicted_labels):
            raise ValueError(f"{len(self.predicted_masks)} predicted masks but {len(self.predicted_labels)} "
                             "predicted phrases")


def _side(images: Sequence[GCGImage], truth: bool):
    masks = [im.truth_masks if truth else im.predicted_masks for im in images]
    labels = list(itertools.chain.from_iterable(im.truth_labels if truth else im.predicted_labels for im in images))
    count = np.fromiter(map(len, masks), dtype=np.int64, count=len(images))
    flat = np.empty(int(count.sum()), dtype=object)
    flat[:] = list(itertools.chain.from_iterable(masks))
    image = np.repeat(np.arange(len(images)), count)
    empty = mask_areas(list(flat)) == 0 if len(flat) else np.zeros(0, dtype=bool)
    return image, flat, labels, empty


def _greedy(rows, cols, n_images: int, nan_rule: str, accept):
    """Per image, pairs of highest IoU while ``accept(iou, row, col)`` holds. Empty-vs-empty pairs are
    the reference's NaN: ``nan_rule="image_zero"`` gives such images no pair, ``"first"`` takes
    them before any number (first in row-major order). Returns (pairs, IoU sum) per image."""
    r_image, r_masks, _, r_empty = rows
    c_image, c_masks, _, c_empty = cols
    r_start, r_count = image_starts(r_image, n_images)
    c_start, c_count = image_starts(c_image, n_images)
    n_pairs, iou_sum = np.zeros(n_images, np.int64), np.zeros(n_images)
    both = np.flatnonzero((r_count > 0) & (c_count > 0))
    for images, r_idx, c_idx in padded_blocks(both, r_start, r_count, c_start, c_count):
        iou = block_mask_iou(r_idx, c_idx, r_masks, c_masks)
        nan = (r_empty[np.maximum(r_idx, 0)] & (r_idx >= 0))[:, :, None] & \
              (c_empty[np.maximum(c_idx, 0)] & (c_idx >= 0))[:, None, :]
        active = np.arange(len(images))
        if nan_rule == "image_zero":
            active = active[~nan.any(axis=(1, 2))]
        else:
            iou[nan] = np.inf
        cols_n = iou.shape[2]
        for _ in range(min(iou.shape[1], cols_n)):
            if not len(active):
                break
            flat = iou[active].reshape(len(active), -1)
            best = np.argmax(flat, axis=1)
            value = flat[np.arange(len(active)), best]
            r, c = best // cols_n, best % cols_n
            ok = accept(value, r_idx[active, r], c_idx[active, c])
            active, r, c, value = active[ok], r[ok], c[ok], value[ok]
            n_pairs[images[active]] += 1
            iou_sum[images[active]] += value
            iou[active, r, :] = -1.0
            iou[active, :, c] = -1.0
    return n_pairs, iou_sum


def gcg_mask_sums(images: Sequence[GCGImage], text_encoder=None, iou_threshold: float = 0.5,
                  text_threshold: float = 0.5, vocabulary: PhraseVocabulary | None = None,
                  recall: bool = True) -> dict[str, float]:
    """What the two means are taken over, additive over batches of images: ``miou_sum`` and ``images``
    (mIoU = their ratio), ``matches`` and ``true_phrases`` (recall = their ratio)."""
    if iou_threshold <= 0:
        raise ValueError(f"iou_threshold must be > 0 (the reference re-pairs taken masks at 0), got {iou_threshold}")
    out = {"miou_sum": 0.0, "images": float(len(images)), "matches": 0.0, "true_phrases": 0.0}
    if not images:
        return out
    truth, predicted = _side(images, truth=True), _side(images, truth=False)
    n_pairs, iou_sum = _greedy(predicted, truth, len(images), "image_zero", lambda iou, r, c: iou > 0)
    out["miou_sum"] = float(np.where(n_pairs > 0, iou_sum / np.maximum(n_pairs, 1), 0.0).sum())
    out["true_phrases"] = float(len(truth[0]))
    if recall and len(truth[0]):
        encoder = resolve_text_encoder(text_encoder)
        vocabulary = vocabulary if vocabulary is not None else PhraseVocabulary()
        t_ids, p_ids = vocabulary.ids(truth[2]), vocabulary.ids(predicted[2])
        emb = vocabulary.embed(encoder, np.concatenate([t_ids, p_ids]))

        def accept(iou, r, c):
            cosine = np.einsum("nd,nd->n", emb[t_ids[r]], emb[p_ids[c]])
            return (iou >= iou_threshold) & (cosine >= text_threshold)

        matches, _ = _greedy(truth, predicted, len(images), "first", accept)
        out["matches"] = float(matches.sum())
    return out


def gcg_mask_miou(images: Sequence[GCGImage]) -> float:
    """GLaMM's GCG mask mIoU (see the module docstring); 0.0 for no image, as the reference."""
    sums = gcg_mask_sums(images, recall=False)
    return sums["miou_sum"] / sums["images"] if sums["images"] else 0.0


def gcg_mask_recall(images: Sequence[GCGImage], text_encoder=None, iou_threshold: float = 0.5,
                    text_threshold: float = 0.5) -> float:
    """GLaMM's GCG mask recall (see the module docstring); ``text_encoder`` as for the grounding
    metrics (an instance or a :func:`~metrics.text_encoder.build_text_encoder` spec). 0.0 when no
    image has a true phrase, as the reference."""
    sums = gcg_mask_sums(images, text_encoder, iou_threshold, text_threshold)
    return sums["matches"] / sums["true_phrases"] if sums["true_phrases"] else 0.0


__all__ = ["GCGImage", "gcg_mask_miou", "gcg_mask_recall", "gcg_mask_sums"]
