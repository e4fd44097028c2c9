"""The GROVE release's iGround evaluation (``eval_iground.py``, ``--evaluation_mode per_video``), reproduced.

Published GROVE figures come from that script, so this module follows it step by step, quirks
included (each is listed in ``docs/evaluation_protocols.md`` against the project's protocol in
:mod:`metrics.functional.grounding`):

* Clips: a ground-truth clip with no prediction is left out (not scored 0). Frames are the
  record's annotated frames; a clip's predicted boxes are taken at those frame indices.
* Boxes: ground-truth corners are truncated to integers, predicted ones clamped to the frame and
  truncated, both stored as COCO ``[x, y, w, h]``; every prediction gets the score 1.0.
* AP50: per clip, pycocotools' ``COCOeval`` on the clip's frames, ``stats[1]`` (AP at IoU 0.5,
  area "all", 100 detections); the mean over clips, where a clip without a ground-truth box
  contributes pycocotools' -1.
* mIoU: per frame with both predicted and ground-truth boxes, the mean of the whole
  predicted x ground-truth IoU matrix; per clip the mean over such frames (0 if none); the mean
  over clips. The IoU is the script's ``+1``-pixel one, applied to the ``[x, y, w, h]`` lists as
  if they were corners (what the script does).
* recall: per frame, the (GT, prediction) pair of highest IoU (same IoU as mIoU) is taken while
  its IoU and the cosine similarity of the two phrases' embeddings both reach 0.5; the first
  refusal ends the frame. True positives over GT boxes per clip (0 if none), mean over clips.
  Phrases are embedded as the script does: ``bert-base-uncased``'s last hidden state averaged
  over all tokens (give its local folder: :class:`metrics.text_encoder.HFMeanPoolEncoder` with
  ``max_length=512``).
* captions: pycocoevalcap on the scored clips (:func:`metrics.functional.captioning.evaluate_captions`).
"""
from __future__ import annotations

import contextlib
import io
from typing import Any, Mapping, Sequence

import numpy as np

from metrics.functional.frame_boxes import frames_from_prediction
from metrics.text_encoder import encode_unique

IOU_THRESHOLD = 0.5
TEXT_THRESHOLD = 0.5
CAPTION_METRICS = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr")
_CHUNK = 1 << 16  # phrase pairs per similarity chunk


def official_gt_boxes(boxes: np.ndarray) -> np.ndarray:
    """GT ``xyxy`` -> the script's integer ``[x, y, w, h]`` (corners truncated, then differences)."""
    b = np.trunc(np.asarray(boxes, dtype=np.float64).reshape(-1, 4))
    return np.concatenate([b[:, :2], b[:, 2:] - b[:, :2]], axis=1)


def official_pred_boxes(boxes: np.ndarray, width: float, height: float) -> np.ndarray:
    """Predicted ``xyxy`` -> clamped to the frame, truncated, integer ``[x, y, w, h]``."""
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4).copy()
    b[:, [0, 2]] = np.clip(b[:, [0, 2]], 0, width)
    b[:, [1, 3]] = np.clip(b[:, [1, 3]], 0, height)
    b = np.trunc(b)
    return np.concatenate([b[:, :2], b[:, 2:] - b[:, :2]], axis=1)


def plus_one_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The script's ``compute_iou`` on row pairs ``a[i], b[i]`` (``+1`` sizes; 0 when the union is 0)."""
    iw = np.maximum(0.0, np.minimum(a[:, 2], b[:, 2]) - np.maximum(a[:, 0], b[:, 0]) + 1)
    ih = np.maximum(0.0, np.minimum(a[:, 3], b[:, 3]) - np.maximum(a[:, 1], b[:, 1]) + 1)
    inter = iw * ih
    union = ((a[:, 2] - a[:, 0] + 1) * (a[:, 3] - a[:, 1] + 1)
             + (b[:, 2] - b[:, 0] + 1) * (b[:, 3] - b[:, 1] + 1) - inter)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union == 0, 0.0, inter / np.where(union == 0, 1.0, union))


def _starts(group: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    count = np.bincount(group, minlength=n)
    return np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int64), count


def _padded(rows_start, rows_count, cols_start, cols_count):
    """Per frame a ``(R, C)`` grid of flat (row, col) indices, padded; ``valid`` marks real cells."""
    r_max, c_max = int(rows_count.max(initial=0)), int(cols_count.max(initial=0))
    r = np.arange(r_max)[None, :, None]
    c = np.arange(c_max)[None, None, :]
    valid = (r < rows_count[:, None, None]) & (c < cols_count[:, None, None])
    row_idx = np.where(valid, rows_start[:, None, None] + r, 0)
    col_idx = np.where(valid, cols_start[:, None, None] + c, 0)
    return row_idx, col_idx, valid


class _Table:
    """Flat per-box arrays of the scored frames (boxes grouped by frame, frames by clip)."""

    def __init__(self, boxes: list, labels: list, frame: list):
        self.boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        self.labels = [str(l) for l in labels]
        self.frame = np.asarray(frame, dtype=np.int64)


def _build(records: Sequence, predictions: Mapping[str, Mapping[str, Any]], source: str):
    images, video_of_image = [], []
    gt_b, gt_l, gt_f, pr_b, pr_l, pr_f = [], [], [], [], [], []
    for v, record in enumerate(records):
        pred = {f.frame: f for f in frames_from_prediction(predictions[record.key], key=record.key, source=source)}
        for i, (frame, boxes, labels) in enumerate(zip(record.frame_indices, record.bboxes, record.labels)):
            img = len(images)
            images.append(f"{record.key}_{i}")
            video_of_image.append(v)
            g = official_gt_boxes(boxes)
            gt_b.extend(g.tolist())
            gt_l.extend(labels)
            gt_f.extend([img] * len(g))
            p = pred.get(int(frame))
            if p is not None and len(p.boxes):
                q = official_pred_boxes(p.boxes, record.width, record.height)
                pr_b.extend(q.tolist())
                pr_l.extend(p.labels)
                pr_f.extend([img] * len(q))
    return images, np.asarray(video_of_image, dtype=np.int64), _Table(gt_b, gt_l, gt_f), _Table(pr_b, pr_l, pr_f)


def _coco_ap50_per_video(images, video_of_image, gt: _Table, pred: _Table, n_videos: int) -> np.ndarray:
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = {
            "images": [{"id": name, "video_id": int(v)} for name, v in zip(images, video_of_image.tolist())],
            "annotations": [{"id": k + 1, "image_id": images[f], "category_id": 1, "bbox": b,
                             "area": b[2] * b[3], "iscrowd": 0}
                            for k, (b, f) in enumerate(zip(gt.boxes.tolist(), gt.frame.tolist()))],
            "categories": [{"id": 1, "name": "object"}],
        }
        coco_gt.createIndex()
        dets = [{"image_id": images[f], "category_id": 1, "bbox": b, "score": 1.0}
                for b, f in zip(pred.boxes.tolist(), pred.frame.tolist())]
        if dets:
            coco_dt = coco_gt.loadRes(dets)
        else:  # pycocotools' loadRes cannot take an empty list
            coco_dt = COCO()
            coco_dt.dataset = {"images": list(coco_gt.dataset["images"]), "annotations": [],
                               "categories": list(coco_gt.dataset["categories"])}
            coco_dt.createIndex()
        out = np.zeros(n_videos)
        frames_of = [[] for _ in range(n_videos)]
        for name, v in zip(images, video_of_image.tolist()):
            frames_of[v].append(name)
        for v in range(n_videos):
            ev = COCOeval(coco_gt, coco_dt, "bbox")
            ev.params.catIds = [1]
            ev.params.imgIds = frames_of[v]
            ev.evaluate()
            ev.accumulate()
            ev.summarize()
            out[v] = ev.stats[1]
    return out


def _miou_per_video(video_of_image, gt: _Table, pred: _Table, n_images: int, n_videos: int) -> np.ndarray:
    g_start, g_count = _starts(gt.frame, n_images)
    p_start, p_count = _starts(pred.frame, n_images)
    both = (g_count > 0) & (p_count > 0)
    pairs = p_count * g_count * both
    frame_of_pair = np.repeat(np.arange(n_images), pairs)
    k = np.arange(len(frame_of_pair)) - np.repeat(np.concatenate([[0], np.cumsum(pairs)[:-1]]), pairs)
    p_idx = p_start[frame_of_pair] + k // np.maximum(g_count[frame_of_pair], 1)
    g_idx = g_start[frame_of_pair] + k % np.maximum(g_count[frame_of_pair], 1)
    iou = plus_one_iou(pred.boxes[p_idx], gt.boxes[g_idx])
    frame_miou = np.bincount(frame_of_pair, weights=iou, minlength=n_images) / np.maximum(pairs, 1)
    frames_used = np.bincount(video_of_image, weights=both.astype(float), minlength=n_videos)
    total = np.bincount(video_of_image, weights=frame_miou * both, minlength=n_videos)
    return np.where(frames_used > 0, total / np.maximum(frames_used, 1), 0.0)


def _recall_per_video(video_of_image, gt: _Table, pred: _Table, n_images: int, n_videos: int, text_encoder,
                      iou_threshold: float, text_threshold: float) -> np.ndarray:
    g_start, g_count = _starts(gt.frame, n_images)
    p_start, p_count = _starts(pred.frame, n_images)
    tp = np.zeros(n_images)
    frames = np.flatnonzero((g_count > 0) & (p_count > 0))
    if len(frames):
        _, emb, index = encode_unique(text_encoder, gt.labels + pred.labels)
        emb = emb.numpy().astype(np.float64)
        g_phrase, p_phrase = index[:len(gt.labels)], index[len(gt.labels):]
        g_idx, p_idx, valid = _padded(g_start[frames], g_count[frames], p_start[frames], p_count[frames])
        iou = np.where(valid, plus_one_iou(gt.boxes[g_idx.reshape(-1)], pred.boxes[p_idx.reshape(-1)]
                                           ).reshape(valid.shape), -np.inf)
        # cosine similarity of the two phrases of each cell, in chunks (bounded memory)
        a, b = g_phrase[g_idx.reshape(-1)], p_phrase[p_idx.reshape(-1)]
        sim = np.concatenate([np.einsum("nd,nd->n", emb[a[s:s + _CHUNK]], emb[b[s:s + _CHUNK]])
                              for s in range(0, len(a), _CHUNK)]).reshape(valid.shape)
        active = np.ones(len(frames), dtype=bool)
        n = len(frames)
        for _ in range(int(min(g_count[frames].max(), p_count[frames].max()))):
            flat = iou.reshape(n, -1)
            best = flat.argmax(axis=1)  # first maximum in row-major order, as np.argmax in the script
            best_iou = flat[np.arange(n), best]
            best_sim = sim.reshape(n, -1)[np.arange(n), best]
            take = active & (best_iou >= iou_threshold) & (best_sim >= text_threshold)
            active = take
            if not take.any():
                break
            tp[frames[take]] += 1
            r, c = np.divmod(best[take], iou.shape[2])
            rows = np.flatnonzero(take)
            iou[rows, r, :] = np.where(valid[rows, r, :], 0.0, -np.inf)
            iou[rows, :, c] = np.where(valid[rows, :, c], 0.0, -np.inf)
    positives = np.bincount(video_of_image, weights=g_count.astype(float), minlength=n_videos)
    hits = np.bincount(video_of_image, weights=tp, minlength=n_videos)
    return np.where(positives > 0, hits / np.maximum(positives, 1), 0.0)


def evaluate_official_iground(records: Mapping[str, Any], predictions: Mapping[str, Mapping[str, Any]],
                              text_encoder, caption_metrics: Sequence[str] = CAPTION_METRICS,
                              iou_threshold: float = IOU_THRESHOLD, text_threshold: float = TEXT_THRESHOLD,
                              source: str = "<memory>") -> dict[str, Any]:
    """``eval_iground.py --evaluation_mode per_video`` on GT records (key -> record) and predictions (the
    JSON format predict writes).

    Returns ``{"metrics": {AP50, mIoU, recall, caption metrics}, "scored_clips": [...],
    "unscored_clips": [...]}`` (GT clips without a prediction, which the script leaves out).
    """
    scored = [r for k, r in records.items() if k in predictions]
    unscored = [k for k in records if k not in predictions]
    metrics: dict[str, float] = {}
    if scored:
        images, video_of_image, gt, pred = _build(scored, predictions, source)
        n_images, n_videos = len(images), len(scored)
        metrics["AP50"] = float(np.mean(_coco_ap50_per_video(images, video_of_image, gt, pred, n_videos)))
        metrics["mIoU"] = float(np.mean(_miou_per_video(video_of_image, gt, pred, n_images, n_videos)))
        metrics["recall"] = float(np.mean(_recall_per_video(video_of_image, gt, pred, n_images, n_videos,
                                                            text_encoder, iou_threshold, text_threshold)))
        if caption_metrics:
            from metrics.functional.captioning import evaluate_captions

            metrics.update(evaluate_captions({r.key: [r.caption] for r in scored},
                                             {r.key: str(predictions[r.key].get("caption", "")) for r in scored},
                                             metrics=caption_metrics))
    else:
        metrics.update({"AP50": 0.0, "mIoU": 0.0, "recall": 0.0})
    return {"metrics": metrics, "scored_clips": [r.key for r in scored], "unscored_clips": unscored}
