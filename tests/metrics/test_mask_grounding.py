"""Mask grounding metrics (``iou_kind="mask"``): on rectangles they equal the box metrics bit for bit;
on random shapes AP50 equals pycocotools' COCOeval "segm" and mIoU / recall equal plain loops written
from the definitions on decoded masks."""
from __future__ import annotations

import contextlib
import io
import math

import numpy as np
import pytest
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from formats.mask_rle import decode_masks, encode_masks
from metrics.functional.frame_boxes import FrameBoxes, GroundingInputError
from metrics.functional.grounding import evaluate_grounding
from metrics.text_encoder import ExactMatchEncoder

EXACT = ExactMatchEncoder()
PHRASES = ["a man", "a knife", "the bowl", "A Man"]
H, W = 20, 24


def _rect_mask(box):
    m = np.zeros((H, W), dtype=bool)
    x1, y1, x2, y2 = (int(v) for v in box)
    m[y1:y2, x1:x2] = True
    return m


def _blob(rng):
    """A random shape: a union of rectangles and discs (sometimes empty)."""
    m = np.zeros((H, W), dtype=bool)
    yy, xx = np.mgrid[:H, :W]
    for _ in range(int(rng.choice([0, 1, 1, 2, 3]))):
        if rng.random() < 0.5:
            x, y = rng.integers(0, W - 2), rng.integers(0, H - 2)
            m[y:y + rng.integers(1, 9), x:x + rng.integers(1, 9)] = True
        else:
            cx, cy, r = rng.uniform(0, W), rng.uniform(0, H), rng.uniform(1, 6)
            m |= (xx - cx) ** 2 + (yy - cy) ** 2 <= r * r
    return m


def _perturb(rng, mask):
    out = mask.copy()
    flip = rng.random(mask.shape) < rng.choice([0.0, 0.05, 0.2])
    out ^= flip
    if rng.random() < 0.3:
        out = np.roll(out, int(rng.integers(-2, 3)), axis=int(rng.integers(0, 2)))
    return out


def _boxes_of(masks):
    out = []
    for m in masks:
        ys, xs = np.nonzero(m)
        out.append([float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)] if len(xs)
                   else [0.0, 0.0, 1.0, 1.0])
    return np.asarray(out, dtype=np.float64).reshape(-1, 4)


def random_mask_case(seed, rectangles):
    """GT and predictions with masks. ``rectangles``: every mask is its box, rasterised."""
    rng = np.random.default_rng(seed)
    gt, pred = {}, {}
    for v in range(int(rng.integers(1, 4))):
        key = f"v{v}"
        frames = 5 * np.arange(int(rng.integers(1, 5)))
        gframes, pframes = [], []
        for f in frames:
            k = int(rng.choice([0, 1, 2, 3, 4]))
            if rectangles:
                boxes = []
                for _ in range(k):
                    x, y = rng.integers(0, 14, size=2)
                    boxes.append([float(x), float(y), float(x + rng.integers(1, 8)), float(y + rng.integers(1, 7))])
                boxes = np.asarray(boxes).reshape(-1, 4)
                masks = [_rect_mask(b) for b in boxes]
            else:
                masks = [_blob(rng) for _ in range(k)]
                boxes = _boxes_of(masks)
            labels = [str(rng.choice(PHRASES)) for _ in range(k)]
            gframes.append(FrameBoxes(int(f), boxes, labels, None, encode_masks(np.asarray(masks).reshape(-1, H, W))))
            if rng.random() < 0.15:
                continue
            p_masks, p_labels, p_boxes = [], [], []
            for m, box, lab in zip(masks, boxes, labels):
                for _ in range(int(rng.choice([0, 1, 1, 2]))):
                    if rectangles:
                        b = np.clip(box + rng.integers(-1, 2, size=4), 0, [W, H, W, H])
                        b[2:] = np.maximum(b[2:], b[:2] + 1)
                        p_boxes.append(b)
                        p_masks.append(_rect_mask(b))
                    else:
                        p_masks.append(_perturb(rng, m))
                    p_labels.append(lab if rng.random() < 0.7 else str(rng.choice(PHRASES)))
            for _ in range(int(rng.choice([0, 0, 1, 2]))):
                if rectangles:
                    x, y = rng.integers(0, 14, size=2)
                    b = np.array([x, y, x + rng.integers(1, 8), y + rng.integers(1, 7)], dtype=np.float64)
                    p_boxes.append(b)
                    p_masks.append(_rect_mask(b))
                else:
                    p_masks.append(_blob(rng))
                p_labels.append(str(rng.choice(PHRASES)))
            boxes_p = np.asarray(p_boxes, dtype=np.float64).reshape(-1, 4) if rectangles else _boxes_of(p_masks)
            scores = rng.choice([0.3, 0.6, 0.9], size=len(p_labels))
            rles = encode_masks(np.asarray(p_masks).reshape(-1, H, W))
            pframes.append(FrameBoxes(int(f), boxes_p, p_labels, scores, rles))
        gt[key], pred[key] = gframes, pframes
    return gt, pred


@pytest.mark.parametrize("score_source", ["constant", "objectness"])
def test_mask_metrics_on_rectangles_equal_the_box_metrics_bit_for_bit(score_source):
    for seed in range(60):
        gt, pred = random_mask_case(seed, rectangles=True)
        box = evaluate_grounding(gt, pred, EXACT, score_source=score_source)
        mask = evaluate_grounding(gt, pred, EXACT, score_source=score_source, iou_kind="mask")
        assert box.keys() == mask.keys()
        for name in box:
            assert (math.isnan(box[name]) and math.isnan(mask[name])) or box[name] == mask[name], (seed, name)


def _quiet(fn, *args):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args)


def coco_segm_ap50(images):
    """AP50 by COCOeval "segm". ``images``: (gt RLEs, det RLEs, det scores) in image-id order."""
    gt_anns, dets = [], []
    for img_id, (g, d, s) in enumerate(images, start=1):
        for rle in g:
            gt_anns.append({"id": len(gt_anns) + 1, "image_id": img_id, "category_id": 1, "iscrowd": 0,
                            "segmentation": rle, "area": float(decode_masks([rle]).sum()), "bbox": [0, 0, 1, 1]})
        for rle, score in zip(d, s):
            dets.append({"image_id": img_id, "category_id": 1, "score": float(score), "segmentation": dict(rle)})
    if not gt_anns:
        return -1.0
    if not dets:
        return 0.0
    coco = COCO()
    coco.dataset = {"images": [{"id": i, "height": H, "width": W} for i in range(1, len(images) + 1)],
                    "annotations": gt_anns, "categories": [{"id": 1, "name": "object"}]}
    _quiet(coco.createIndex)
    res = _quiet(coco.loadRes, dets)
    ev = COCOeval(coco, res, "segm")
    ev.params.iouThrs = np.array([0.5])
    ev.params.areaRng = [[0 ** 2, 1e5 ** 2]]
    ev.params.areaRngLbl = ["all"]
    ev.params.maxDets = [100]
    _quiet(ev.evaluate)
    _quiet(ev.accumulate)
    s = ev.eval["precision"][0, :, :, 0, 0]
    return float(np.mean(s[s > -1])) if (s > -1).any() else -1.0


def plain_iou(a, b):
    union = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / union) if union else 0.0


def plain_greedy(g, p, accept):
    """Repeatedly the remaining (GT, pred) pair of highest mask IoU, ties first in (GT, pred) order;
    stop at the first refusal. Returns the accepted IoUs."""
    if p is None or not g.labels or not p.labels:
        return []
    gm, pm = decode_masks(g.masks), decode_masks(p.masks)
    free_g, free_p, taken = list(range(len(gm))), list(range(len(pm))), []
    while free_g and free_p:
        best = max(((plain_iou(gm[i], pm[j]), -i, -j) for i in free_g for j in free_p))
        v, i, j = best[0], -best[1], -best[2]
        if not accept(v, g.labels[i], p.labels[j]):
            break
        taken.append(v)
        free_g.remove(i)
        free_p.remove(j)
    return taken


def test_mask_metrics_on_random_shapes_equal_cocoeval_segm_and_plain_loops():
    same = lambda a, b: " ".join(a.split()).casefold() == " ".join(b.split()).casefold()  # noqa: E731
    for seed in range(40):
        gt, pred = random_mask_case(1000 + seed, rectangles=False)
        got = evaluate_grounding(gt, pred, EXACT, score_source="objectness", iou_kind="mask")
        per_video_ap, all_images = [], []
        video_miou, frame_miou, video_recall, n_match, n_gt = [], [], [], 0, 0
        for key, frames in gt.items():
            preds = {f.frame: f for f in pred[key]}
            images = [(f.masks, preds[f.frame].masks if f.frame in preds else [],
                       preds[f.frame].scores.tolist() if f.frame in preds else []) for f in frames]
            all_images += images
            values, matches, boxes = [], 0, 0
            for f in frames:
                if not f.labels:
                    continue
                pairs = plain_greedy(f, preds.get(f.frame), lambda v, a, b: v > 0)
                values.append(sum(pairs) / len(pairs) if pairs else 0.0)
                matches += len(plain_greedy(f, preds.get(f.frame), lambda v, a, b: v >= 0.5 and same(a, b)))
                boxes += len(f.labels)
            if values:
                per_video_ap.append(coco_segm_ap50(images))
                video_miou.append(np.mean(values))
                frame_miou += values
                video_recall.append(matches / boxes)
                n_match, n_gt = n_match + matches, n_gt + boxes
        if not per_video_ap:
            assert math.isnan(got["AP50"])
            continue
        assert got["AP50"] == pytest.approx(np.mean(per_video_ap), abs=1e-12), seed
        assert got["AP50_frame"] == pytest.approx(coco_segm_ap50(all_images), abs=1e-12), seed
        assert got["mIoU"] == pytest.approx(np.mean(video_miou), abs=1e-12), seed
        assert got["mIoU_frame"] == pytest.approx(np.mean(frame_miou), abs=1e-12), seed
        assert got["recall"] == pytest.approx(np.mean(video_recall), abs=1e-12), seed
        assert got["recall_frame"] == pytest.approx(n_match / n_gt, abs=1e-12), seed


def test_a_box_without_a_mask_counts_as_an_empty_mask():
    square = np.zeros((1, H, W), dtype=bool)
    square[0, 2:8, 2:8] = True
    rle = encode_masks(square)
    gt = {"c": [FrameBoxes(0, np.array([[2.0, 2, 8, 8]]), ["a man"], None, rle)]}
    hit = {"c": [FrameBoxes(0, np.array([[2.0, 2, 8, 8]] * 2), ["a man"] * 2, None, [None, rle[0]])]}
    miss = {"c": [FrameBoxes(0, np.array([[2.0, 2, 8, 8]]), ["a man"])]}  # boxes right, no mask
    assert evaluate_grounding(gt, hit, EXACT, iou_kind="mask")["recall"] == 1.0
    result = evaluate_grounding(gt, miss, EXACT, iou_kind="mask")
    assert result["recall"] == 0.0 and result["mIoU"] == 0.0 and result["AP50"] == 0.0
    assert evaluate_grounding(gt, miss, EXACT)["recall"] == 1.0  # the boxes alone do match


def test_masks_must_be_parallel_to_boxes_and_the_kind_known():
    with pytest.raises(GroundingInputError, match="2 boxes but 1 masks"):
        FrameBoxes(0, np.zeros((2, 4)) + [0, 0, 1, 1], ["a", "b"], None, [None])
    with pytest.raises(ValueError, match="iou_kind"):
        evaluate_grounding({}, {}, EXACT, iou_kind="polygon")
