"""Grounding metrics against pycocotools' COCOeval (AP50), plain-loop references written
from the metric definitions (mIoU, recall) and hand-computed cases."""
from __future__ import annotations

import contextlib
import io
import math

import numpy as np
import pytest
import torch
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from metrics.functional.frame_boxes import (
    FrameBoxes,
    GroundingInputError,
    frames_from_record,
    ground_truth_from_records,
    predictions_from_dict,
)
from metrics.functional.grounding import evaluate_grounding
from metrics.text_encoder import ExactMatchEncoder

EXACT = ExactMatchEncoder()
VOCAB = ["a man", "a knife", "the bowl", "a woman", "A Man"]  # "A Man" == "a man" after normalisation


# ---------------------------------------------------------------- references

def _quiet(fn, *args):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args)


def coco_ap50(images, max_dets=100, default_params=False):
    """AP50 by pycocotools. ``images``: list of (gt boxes xyxy, det boxes xyxy, det scores), in image-id order."""
    gt_anns, dets = [], []
    for img_id, (g, d, s) in enumerate(images, start=1):
        for box in g:
            w, h = box[2] - box[0], box[3] - box[1]
            gt_anns.append({"id": len(gt_anns) + 1, "image_id": img_id, "category_id": 1,
                            "bbox": [box[0], box[1], w, h], "area": w * h, "iscrowd": 0})
        for box, score in zip(d, s):
            dets.append({"image_id": img_id, "category_id": 1, "score": float(score),
                         "bbox": [box[0], box[1], box[2] - box[0], box[3] - box[1]]})
    if not gt_anns:
        return -1.0
    if not dets:  # loadRes cannot load an empty list; COCOeval's accumulate gives 0 then
        return 0.0
    coco = COCO()
    coco.dataset = {"images": [{"id": i} for i in range(1, len(images) + 1)], "annotations": gt_anns,
                    "categories": [{"id": 1, "name": "object"}]}
    _quiet(coco.createIndex)
    res = _quiet(coco.loadRes, dets)
    ev = COCOeval(coco, res, "bbox")
    if not default_params:  # AP at IoU .5 / area all / maxDets is independent of the other settings
        ev.params.iouThrs = np.array([0.5])
        ev.params.areaRng = [[0 ** 2, 1e5 ** 2]]
        ev.params.areaRngLbl = ["all"]
        ev.params.maxDets = [max_dets]
    _quiet(ev.evaluate)
    _quiet(ev.accumulate)
    t = int(np.flatnonzero(ev.params.iouThrs == 0.5)[0])
    m = ev.params.maxDets.index(max_dets)
    s = ev.eval["precision"][t, :, :, 0, m]
    return float(np.mean(s[s > -1])) if (s > -1).any() else -1.0


def _images_of(gt_frames, pred_frames, score_source):
    """(gt, det, score) per image of one clip, images ordered by frame index."""
    g = {f.frame: f for f in gt_frames}
    p = {f.frame: f for f in pred_frames}
    out = []
    for frame in sorted(set(g) | set(p)):
        gb = g[frame].boxes.tolist() if frame in g else []
        pf = p.get(frame)
        db = pf.boxes.tolist() if pf is not None else []
        sc = ([1.0] * len(db) if score_source == "constant" else pf.scores.tolist()) if pf is not None else []
        out.append((gb, db, sc))
    return out


def reference_ap50(gt, pred, score_source="constant", max_dets=100):
    per_video, all_images = [], []
    for key, frames in gt.items():
        images = _images_of(frames, pred.get(key, []), score_source)
        all_images += images
        if sum(len(f.labels) for f in frames):
            per_video.append(coco_ap50(images, max_dets))
    return (float(np.mean(per_video)) if per_video else math.nan), coco_ap50(all_images, max_dets)


def iou_plain(a, b):
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    if iw <= 0 or ih <= 0:
        return 0.0
    inter = iw * ih
    union = max(a[2] - a[0], 0) * max(a[3] - a[1], 0) + max(b[2] - b[0], 0) * max(b[3] - b[1], 0) - inter
    return inter / union if union > 0 else 0.0


def greedy_plain(gt_frame, pred_frame, accept):
    """The definition: repeatedly take the remaining (GT, pred) pair of highest IoU; stop at the first refusal.
    Ties: first in (GT, prediction) order. Returns the accepted pairs' IoUs."""
    if pred_frame is None:
        return []
    free_g, free_p, taken = set(range(len(gt_frame.labels))), set(range(len(pred_frame.labels))), []
    while free_g and free_p:
        best = None
        for i in sorted(free_g):
            for j in sorted(free_p):
                v = iou_plain(gt_frame.boxes[i], pred_frame.boxes[j])
                if best is None or v > best[0]:
                    best = (v, i, j)
        v, i, j = best
        if not accept(v, gt_frame.labels[i], pred_frame.labels[j]):
            break
        taken.append(v)
        free_g.discard(i)
        free_p.discard(j)
    return taken


def reference_miou_recall(gt, pred, same_phrase, iou_thr=0.5):
    video_miou, frame_miou, video_recall, n_match, n_gt = [], [], [], 0, 0
    for key, frames in gt.items():
        preds = {f.frame: f for f in pred.get(key, [])}
        values, matches, boxes = [], 0, 0
        for f in frames:
            if not f.labels:
                continue
            pairs = greedy_plain(f, preds.get(f.frame), lambda v, a, b: v > 0)
            values.append(sum(pairs) / len(pairs) if pairs else 0.0)
            matches += len(greedy_plain(f, preds.get(f.frame), lambda v, a, b: v >= iou_thr and same_phrase(a, b)))
            boxes += len(f.labels)
        if values:
            video_miou.append(sum(values) / len(values))
            frame_miou += values
            video_recall.append(matches / boxes)
            n_match += matches
            n_gt += boxes
    mean = lambda x: sum(x) / len(x) if x else math.nan  # noqa: E731
    return {"mIoU": mean(video_miou), "mIoU_frame": mean(frame_miou),
            "recall": mean(video_recall), "recall_frame": n_match / n_gt if n_gt else math.nan}


def same_exact(a, b):
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


# ---------------------------------------------------------------- random cases

def _random_box(rng, grid):
    if grid:  # integer grid: exact IoU ties and exact 0.5 hits
        x1, y1 = rng.integers(0, 16, size=2)
        return [float(x1), float(y1), float(x1 + rng.integers(1, 8)), float(y1 + rng.integers(1, 8))]
    x1, y1 = rng.uniform(0, 80, size=2)
    return [x1, y1, x1 + rng.uniform(1, 30), y1 + rng.uniform(1, 30)]


def _jitter(rng, box, grid):
    d = rng.integers(-1, 2, size=4).astype(float) if grid else rng.normal(0, 2.5, size=4)
    b = (np.asarray(box) + d).tolist()
    if rng.random() < 0.97:  # keep it a proper box; the rest stay (possibly) inverted on purpose
        b = [min(b[0], b[2]), min(b[1], b[3]),
             max(b[0], b[2]) + 0.5 * (b[0] == b[2]), max(b[1], b[3]) + 0.5 * (b[1] == b[3])]
    return b


def random_case(seed):
    rng = np.random.default_rng(seed)
    grid = rng.random() < 0.5
    score_mode = rng.choice(["constant", "tied", "distinct"])
    gt, pred = {}, {}
    for v in range(int(rng.integers(1, 5))):
        key = f"vid{v}_{seed}"
        start, step, n = int(rng.integers(0, 40)), int(rng.integers(2, 7)), int(rng.integers(1, 7))
        grid_frames = start + step * np.arange(n)
        no_gt_video = rng.random() < 0.15
        gt_frames = []
        for f in grid_frames:
            k = 0 if no_gt_video else int(rng.choice([0, 0, 1, 2, 3, 5]))
            gt_frames.append(FrameBoxes(int(f), np.asarray([_random_box(rng, grid) for _ in range(k)]).reshape(-1, 4),
                                        [str(rng.choice(VOCAB)) for _ in range(k)]))
        gt[key] = gt_frames
        if rng.random() < 0.1:
            continue  # clip missing from the predictions
        pred_frames = []
        off_grid = [int(grid_frames[-1] + step * (i + 1)) for i in range(int(rng.integers(0, 2)))] + \
                   [int(f + 1) for f in grid_frames if rng.random() < 0.15]
        for frame in sorted({int(f) for f in grid_frames if rng.random() < 0.85} | set(off_grid)):
            src = next((g for g in gt_frames if g.frame == frame), None)
            boxes, labels = [], []
            if src is not None:
                for b, l in zip(src.boxes.tolist(), src.labels):
                    for _ in range(int(rng.choice([0, 1, 1, 2]))):
                        boxes.append(_jitter(rng, b, grid))
                        labels.append(l if rng.random() < 0.7 else str(rng.choice(VOCAB)))
            extra = int(rng.integers(101, 131)) if rng.random() < 0.04 else int(rng.choice([0, 0, 1, 2, 4]))
            for _ in range(extra):
                boxes.append(_random_box(rng, grid))
                labels.append(str(rng.choice(VOCAB)))
            order = rng.permutation(len(boxes))
            boxes = np.asarray(boxes).reshape(-1, 4)[order]
            labels = [labels[i] for i in order]
            if score_mode == "constant":
                scores = np.ones(len(labels))
            elif score_mode == "tied":
                scores = rng.choice([0.3, 0.6, 0.9], size=len(labels))
            else:
                scores = rng.random(len(labels))
            pred_frames.append(FrameBoxes(frame, boxes, labels, scores))
        pred[key] = pred_frames
    pred[f"not_in_gt_{seed}"] = [FrameBoxes(0, np.array([[0.0, 0, 5, 5]]), ["a man"], np.array([0.5]))]
    return gt, pred


CASES = [random_case(seed) for seed in range(220)]


def test_random_cases_cover_the_hard_parts():
    frames = [(f, g) for gt, pred in CASES for key in gt for f in pred.get(key, []) for g in [gt[key]]]
    assert any(len(f.labels) > 100 for f, _ in frames)
    assert any(f.frame not in {x.frame for x in g} for f, g in frames)  # off-grid predicted frames
    assert any(all(not x.labels for x in gt[k]) for gt, _ in CASES for k in gt)  # clips without GT
    assert any(k not in pred for gt, pred in CASES for k in gt)  # clips without predictions


@pytest.mark.parametrize("score_source", ["constant", "objectness"])
def test_ap50_equals_pycocotools_on_random_cases(score_source):
    for gt, pred in CASES:
        got = evaluate_grounding(gt, pred, levels=("video", "frame"), score_source=score_source, metrics=("AP50",))
        video, frame = reference_ap50(gt, pred, score_source)
        if math.isnan(video):
            assert math.isnan(got["AP50"]) and math.isnan(got["AP50_frame"])
            continue
        assert got["AP50"] == pytest.approx(video, abs=1e-6)
        assert got["AP50_frame"] == pytest.approx(frame, abs=1e-6)


def test_ap50_equals_pycocotools_with_default_params_and_small_max_dets():
    for gt, pred in CASES[:25]:
        got = evaluate_grounding(gt, pred, score_source="objectness", metrics=("AP50",), levels=("frame",))
        images = [im for key, frames in gt.items() for im in _images_of(frames, pred.get(key, []), "objectness")]
        want = coco_ap50(images, default_params=True)
        if want >= 0:
            assert got["AP50_frame"] == pytest.approx(want, abs=1e-6)
    for gt, pred in CASES[25:60]:
        got = evaluate_grounding(gt, pred, score_source="objectness", metrics=("AP50",), max_dets=2)
        video, frame = reference_ap50(gt, pred, "objectness", max_dets=2)
        if not math.isnan(video):
            assert got["AP50"] == pytest.approx(video, abs=1e-6)
            assert got["AP50_frame"] == pytest.approx(frame, abs=1e-6)


def test_miou_and_recall_equal_plain_loops_on_random_cases():
    for gt, pred in CASES:
        got = evaluate_grounding(gt, pred, text_encoder=EXACT, metrics=("mIoU", "recall"))
        want = reference_miou_recall(gt, pred, same_exact)
        for name, value in want.items():
            if math.isnan(value):
                assert math.isnan(got[name])
            else:
                assert got[name] == pytest.approx(value, abs=1e-9), name


class AngleEncoder:
    """Phrase -> unit vector at a fixed angle: cosine similarities between 0 and 1, not just 0/1."""

    def __init__(self, angles):
        self.angles = angles

    def encode(self, texts):
        a = torch.tensor([self.angles[t] for t in texts], dtype=torch.float64)
        return torch.stack([torch.cos(a), torch.sin(a)], dim=1).float()


def test_recall_text_threshold_with_graded_similarities_equals_plain_loop():
    rng = np.random.default_rng(5)
    angles = {p: float(rng.uniform(0, math.pi / 2)) for p in VOCAB}
    enc = AngleEncoder(angles)
    emb = {p: enc.encode([p])[0].numpy() for p in VOCAB}
    for threshold in (0.3, 0.5, 0.9):
        for gt, pred in CASES[:80]:
            got = evaluate_grounding(gt, pred, text_encoder=enc, metrics=("recall",), text_threshold=threshold)
            want = reference_miou_recall(gt, pred, lambda a, b: float(emb[a] @ emb[b]) >= threshold)
            if math.isnan(want["recall"]):
                assert math.isnan(got["recall"])
            else:
                assert got["recall"] == pytest.approx(want["recall"], abs=1e-12)
                assert got["recall_frame"] == pytest.approx(want["recall_frame"], abs=1e-12)


# ---------------------------------------------------------------- hand-computed cases

def fb(frame, boxes, labels=None, scores=None):
    boxes = np.asarray(boxes, dtype=float).reshape(-1, 4)
    return FrameBoxes(frame, boxes, labels if labels is not None else ["a man"] * len(boxes), scores)


SQUARE = [0, 0, 10, 10]


def test_ap50_hand_case_tied_scores_rank_by_frame_then_order():
    gt = {"v": [fb(0, [SQUARE]), fb(6, [SQUARE])]}
    # TP listed first in frame 0: ranking TP, FP, FP -> precision 1 up to recall 0.5 -> 51/101.
    tp_first = {"v": [fb(0, [SQUARE, [20, 20, 30, 30]]), fb(6, [[50, 50, 60, 60]])]}
    # FP first: FP, TP, FP -> interpolated precision 0.5 up to recall 0.5.
    fp_first = {"v": [fb(0, [[20, 20, 30, 30], SQUARE]), fb(6, [[50, 50, 60, 60]])]}
    for pred, want in ((tp_first, 51 / 101), (fp_first, 0.5 * 51 / 101)):
        got = evaluate_grounding(gt, pred, metrics=("AP50",))
        assert got["AP50"] == pytest.approx(want) and got["AP50_frame"] == pytest.approx(want)
    # Objectness scores put the TP first again.
    scored = {"v": [fb(0, [[20, 20, 30, 30], SQUARE], scores=[0.2, 0.9]), fb(6, [[50, 50, 60, 60]], scores=[0.1])]}
    got = evaluate_grounding(gt, scored, score_source="objectness", metrics=("AP50",))
    assert got["AP50"] == pytest.approx(51 / 101)


def test_ap50_equal_iou_goes_to_the_last_gt_as_in_cocoeval():
    # D1 has IoU 1/2 with both G1 and G2; COCOeval gives it the LAST (G2), leaving G1 for D2
    # (IoU 1 with G1, 1/3 with G2): two TPs. Taking the first GT would leave D2 a false positive.
    g1, g2 = [0, 0, 10, 20], [0, 0, 20, 10]
    gt = {"v": [fb(0, [g1, g2])]}
    pred = {"v": [fb(0, [[0, 0, 10, 10], g1], scores=[0.9, 0.8])]}
    got = evaluate_grounding(gt, pred, score_source="objectness", metrics=("AP50",))
    want = coco_ap50([([g1, g2], [[0, 0, 10, 10], g1], [0.9, 0.8])])
    assert want == pytest.approx(1.0, abs=1e-12)
    assert got["AP50"] == pytest.approx(want, abs=1e-12) and got["AP50_frame"] == pytest.approx(want, abs=1e-12)


def test_ap50_iou_threshold_is_inclusive():
    gt = {"v": [fb(0, [[0, 0, 2, 1]])]}
    exactly_half = {"v": [fb(0, [[0, 0, 1, 1]])]}  # IoU = 1/2 exactly -> TP (COCOeval: iou >= t)
    just_below = {"v": [fb(0, [[0, 0, 0.999, 1]])]}
    assert evaluate_grounding(gt, exactly_half, metrics=("AP50",))["AP50"] == pytest.approx(1.0)
    assert evaluate_grounding(gt, just_below, metrics=("AP50",))["AP50"] == 0.0


def test_ap50_video_vs_frame_level_and_excluded_video():
    gt = {"empty": [fb(0, [])], "a": [fb(0, [SQUARE])], "b": [fb(0, [SQUARE])]}
    pred = {"empty": [fb(0, [SQUARE])], "a": [fb(0, [SQUARE])], "b": [fb(0, [[40, 40, 50, 50]])],
            "stranger": [fb(0, [SQUARE])]}
    got = evaluate_grounding(gt, pred, metrics=("AP50",))
    assert got["AP50"] == pytest.approx(0.5)  # (1 + 0) / 2: "empty" is excluded, not averaged as -1
    # Frame level ranks "empty"'s false positive first (clip order), then a's TP, then b's FP.
    assert got["AP50_frame"] == pytest.approx(0.5 * 51 / 101)
    assert got["num_videos"] == 2 and got["num_videos_excluded"] == 1 and got["num_pred_clips_ignored"] == 1


def test_miou_hand_case():
    a, b = [0, 0, 10, 10], [5, 0, 15, 10]
    x, y = [0, 0, 10, 10], [6, 0, 16, 10]  # IoU(A,X)=1, IoU(B,X)=1/3, IoU(A,Y)=1/4, IoU(B,Y)=9/11
    gt = {"v1": [fb(0, [a, b]), fb(5, [a]), fb(10, [a]), fb(15, [])],
          "v2": [fb(0, [a])]}
    pred = {"v1": [fb(0, [x, y, [100, 100, 110, 110]]), fb(10, [[10, 0, 20, 10]]), fb(15, [a])],
            "v2": [fb(0, [[0, 0, 10, 20]])]}
    got = evaluate_grounding(gt, pred, metrics=("mIoU",))
    # v1 frames: greedy (A,X)=1 then (B,Y)=9/11 -> 10/11; no prediction -> 0; edge contact -> 0.
    assert got["mIoU"] == pytest.approx((10 / 33 + 0.5) / 2)
    assert got["mIoU_frame"] == pytest.approx((10 / 11 + 0 + 0 + 0.5) / 4)


def test_recall_text_threshold_and_stop_at_first_failure():
    a, b = [0, 0, 10, 10], [20, 0, 30, 10]
    gt = {"v": [fb(0, [a, b], ["a man", "a knife"])]}
    right = {"v": [fb(0, [a, b], ["a man", "a knife"])]}
    wrong = {"v": [fb(0, [a, b], ["a bowl", "a spoon"])]}
    assert evaluate_grounding(gt, right, EXACT, metrics=("recall",))["recall"] == 1.0
    assert evaluate_grounding(gt, wrong, EXACT, metrics=("recall",))["recall"] == 0.0
    # Equal IoU 1 for both pairs: (A, X) comes first and fails on its phrase -> stop, (B, Y) never tried.
    stop = {"v": [fb(0, [a, b], ["a knife", "a knife"])]}
    assert evaluate_grounding(gt, stop, EXACT, metrics=("recall",))["recall"] == 0.0
    # Make (B, Y) the best pair: it matches, then (A, X) fails -> 1 of 2.
    first_ok = {"v": [fb(0, [[0, 0, 10, 9], b], ["a knife", "a knife"])]}
    got = evaluate_grounding(gt, first_ok, EXACT, metrics=("recall",))
    assert got["recall"] == 0.5 and got["recall_frame"] == 0.5
    # IoU below threshold stops too, even with the right phrase.
    low = {"v": [fb(0, [[0, 0, 10, 4]], ["a man"])]}
    assert evaluate_grounding(gt, low, EXACT, metrics=("recall",))["recall"] == 0.0


def test_recall_video_level_averages_videos_frame_level_pools_boxes():
    a, b, c = [0, 0, 10, 10], [20, 0, 30, 10], [40, 0, 50, 10]
    gt = {"v1": [fb(0, [a])], "v2": [fb(0, [a, b, c])], "v3": [fb(0, [])]}
    pred = {"v1": [fb(0, [a])], "v2": [fb(0, [[100, 100, 110, 110]])], "v3": [fb(0, [a])]}
    got = evaluate_grounding(gt, pred, EXACT, metrics=("recall",))
    assert got["recall"] == pytest.approx(0.5) and got["recall_frame"] == pytest.approx(0.25)


def test_no_gt_at_all_gives_nan_and_counts():
    got = evaluate_grounding({"v": [fb(0, [])]}, {"v": [fb(0, [SQUARE])]}, EXACT)
    assert all(math.isnan(got[k]) for k in ("AP50", "mIoU", "recall", "AP50_frame", "mIoU_frame", "recall_frame"))
    assert got["num_videos"] == 0 and got["num_videos_excluded"] == 1


def test_levels_and_metrics_select_keys():
    gt = {"v": [fb(0, [SQUARE])]}
    got = evaluate_grounding(gt, gt, levels=("frame",), metrics=("AP50", "mIoU"))
    assert {"AP50_frame", "mIoU_frame"} <= set(got) and not {"AP50", "mIoU", "recall", "recall_frame"} & set(got)
    # COCOeval's precision is tp / (tp + fp + eps): a perfect AP is 1 - 1e-16.
    assert got["AP50_frame"] == pytest.approx(1.0, abs=1e-12) and got["mIoU_frame"] == 1.0


# ---------------------------------------------------------------- inputs

def _raw_record():
    return {"video_fname": "v.mp4", "video_id": "vid", "clip_id": "3", "fps": 10.0, "clip_start_frame": 100,
            "clip_end_frame": 104, "width": 64, "height": 48, "caption": "a man holds a knife",
            "tagged_caption": "<p>a man</p> holds <p>a knife</p>", "phrases": ["a man", "a knife"],
            "bboxes": [[[1, 2, 30, 40], [5, 5, 9, 9]], [], [[0, 0, 10, 10]]],
            "labels": [["a man", "a knife"], [], ["a knife"]]}


def test_frames_from_record_follow_the_annotation_grid():
    from formats.records import GroundedRecord

    record = GroundedRecord.from_dict(_raw_record())
    frames = frames_from_record(record)
    assert [f.frame for f in frames] == [100, 102, 104]
    assert frames[0].labels == ["a man", "a knife"] and frames[1].boxes.shape == (0, 4)
    np.testing.assert_allclose(frames[2].boxes, [[0, 0, 10, 10]])
    gt = ground_truth_from_records([record])
    assert list(gt) == ["vid_3"]
    with pytest.raises(GroundingInputError, match="vid_3"):
        ground_truth_from_records([record, record])


def test_predictions_from_dict_and_errors():
    data = {"vid_3": {"caption": "c", "frames": [{"frame": 100, "boxes": [[1, 2, 30, 40]], "labels": ["a man"],
                                                  "scores": [0.9]}]}}
    pred = predictions_from_dict(data, source="preds.json")
    assert pred["vid_3"][0].frame == 100 and pred["vid_3"][0].scores.tolist() == [0.9]
    bad = {"vid_3": {"frames": [{"frame": 100, "boxes": [[1, 2, 30, 40]], "labels": []}]}}
    with pytest.raises(GroundingInputError, match=r"preds.json, clip 'vid_3': frames\[0\].*1 boxes but 0 labels"):
        predictions_from_dict(bad, source="preds.json")
    with pytest.raises(GroundingInputError, match="'frames'"):
        predictions_from_dict({"vid_3": {"caption": "c"}}, source="preds.json")
    with pytest.raises(GroundingInputError, match="non-negative integer"):
        FrameBoxes(-1, np.zeros((0, 4)), [])
    with pytest.raises(GroundingInputError, match="non-finite"):
        FrameBoxes(0, [[0, 0, np.nan, 1]], ["a"])


def test_evaluate_rejects_bad_options_and_inputs():
    gt = {"v": [fb(0, [SQUARE])]}
    with pytest.raises(GroundingInputError, match="clip 'v' lists frame 0 more than once"):
        evaluate_grounding(gt, {"v": [fb(0, [SQUARE]), fb(0, [SQUARE])]}, EXACT)
    with pytest.raises(GroundingInputError, match="objectness"):
        evaluate_grounding(gt, {"v": [fb(0, [SQUARE])]}, score_source="objectness", metrics=("AP50",))
    with pytest.raises(ValueError, match="levels"):
        evaluate_grounding(gt, gt, EXACT, levels=("clip",))
    with pytest.raises(ValueError, match="score_source"):
        evaluate_grounding(gt, gt, EXACT, score_source="random")
