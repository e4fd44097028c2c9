"""The evaluator's mask figures: computed when both the GT and the predictions carry masks, equal to the
functional mask metrics; a predictions file without masks (or a GT without masks) gives exactly the
figures it gave before, and no mask figure."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from formats.mask_rle import encode_masks
from formats.records import write_records_json
from metrics.evaluator.evaluation import evaluate_files, evaluate_predictions, filter_by_objectness, format_table
from metrics.evaluator.prediction_validation import InvalidPredictionError
from metrics.functional.frame_boxes import GroundingInputError, frames_from_record, predictions_from_dict
from metrics.functional.gcg_masks import GCGImage, gcg_mask_miou, gcg_mask_recall
from metrics.functional.grounding import evaluate_grounding
from tests.fixtures.metric_records import random_dataset
from tests.metrics.test_evaluate import valid_predictions

FAST = dict(text_encoder="exact", caption_metrics=(), capture=False)


def _ellipse(box, width, height):
    """The ellipse inscribed in a box, rasterised at pixel centres."""
    yy, xx = np.mgrid[:height, :width] + 0.5
    x1, y1, x2, y2 = box
    cx, cy, rx, ry = (x1 + x2) / 2, (y1 + y2) / 2, max((x2 - x1) / 2, 0.5), max((y2 - y1) / 2, 0.5)
    return ((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 <= 1


def with_gt_masks(records):
    return [dataclasses.replace(r, masks=[encode_masks(np.asarray([_ellipse(b, r.width, r.height) for b in boxes])
                                                       .reshape(-1, r.height, r.width)) for boxes in r.bboxes])
            for r in records]


def with_predicted_masks(preds, records):
    size = {r.key: (r.width, r.height) for r in records}
    out = {}
    for key, pred in preds.items():
        w, h = size[key]
        frames = []
        for i, f in enumerate(pred["frames"]):
            masks = encode_masks(np.asarray([_ellipse(b, w, h) for b in f["boxes"]]).reshape(-1, h, w))
            if i % 3 == 1 and masks:
                masks[0] = None  # a box without a mask
            frames.append({**f, "masks": masks})
        out[key] = {**pred, "frames": frames}
    return out


@pytest.fixture()
def case(tmp_path):
    records, preds = random_dataset(seed=5, n=6)
    preds = valid_predictions(preds)
    return records, with_gt_masks(records), preds, with_predicted_masks(preds, records)


def _paths(tmp_path, records, preds, name):
    gt = write_records_json(records, tmp_path / f"{name}_gt.json")
    pred = tmp_path / f"{name}_pred.json"
    pred.write_text(json.dumps(preds))
    return gt, pred


@pytest.mark.parametrize("level", ["both", "center"])
def test_figures_without_masks_on_either_side_are_the_box_figures_bit_for_bit(case, tmp_path, level):
    records, masked, preds, masked_preds = case
    before = evaluate_files(*_paths(tmp_path, records, preds, "plain"), level=level, **FAST)["metrics"]
    gt_only = evaluate_files(*_paths(tmp_path, masked, preds, "gt_masks"), level=level, **FAST)["metrics"]
    pred_only = evaluate_files(*_paths(tmp_path, records, masked_preds, "pred_masks"), level=level, **FAST)["metrics"]
    assert gt_only == before and pred_only == before
    assert not [k for k in before if k.startswith(("mask_", "gcg_"))]


def test_mask_figures_equal_the_functional_mask_metrics_and_box_figures_stay(case, tmp_path):
    records, masked, preds, masked_preds = case
    before = evaluate_files(*_paths(tmp_path, records, preds, "plain"), score_source="objectness", **FAST)["metrics"]
    got = evaluate_files(*_paths(tmp_path, masked, masked_preds, "both"), score_source="objectness", **FAST)["metrics"]
    assert {k: v for k, v in got.items() if not k.startswith(("mask_", "gcg_"))} == before
    want = evaluate_grounding({r.key: frames_from_record(r) for r in masked}, predictions_from_dict(masked_preds),
                              "exact", score_source="objectness", iou_kind="mask")
    for name in ("AP50", "mIoU", "recall", "AP50_frame", "mIoU_frame", "recall_frame"):
        assert got[f"mask_{name}"] == pytest.approx(want[name], abs=1e-12), name
    # Ellipses inscribed in the same boxes agree less than the boxes themselves
    assert 0 < got["mask_mIoU"] < got["mIoU"]
    # GLaMM's GCG figures: one image per annotated frame with a true mask
    images = []
    for r in masked:
        frames = {f["frame"]: f for f in masked_preds[r.key]["frames"]}
        for i, frame in enumerate(r.frame_indices):
            if not r.labels[i]:
                continue
            f = frames.get(int(frame), {"masks": [], "labels": []})
            kept = [(m, l) for m, l in zip(f["masks"], f["labels"]) if m is not None]
            images.append(GCGImage(r.masks[i], r.labels[i], [m for m, _ in kept], [l for _, l in kept]))
    assert got["gcg_mask_mIoU"] == pytest.approx(gcg_mask_miou(images), abs=1e-12)
    assert got["gcg_mask_recall"] == pytest.approx(gcg_mask_recall(images, "exact"), abs=1e-12)
    assert 0 < got["gcg_mask_recall"] < 1


def test_objectness_filter_and_skipped_boxes_keep_masks_aligned(case):
    records, masked, _, masked_preds = case
    key = next(k for k, p in masked_preds.items() if any(len(f["boxes"]) > 1 for f in p["frames"]))
    frame = next(f for f in masked_preds[key]["frames"] if len(f["boxes"]) > 1)
    cut = sorted(frame["scores"])[1]
    kept = filter_by_objectness({"frames": [frame]}, cut)["frames"][0]
    assert kept["masks"] == [m for m, s in zip(frame["masks"], frame["scores"]) if s >= cut]
    # An inverted box skipped under invalid="skip" takes its mask with it
    bad = json.loads(json.dumps(masked_preds))
    f0 = next(f for f in bad[key]["frames"] if len(f["boxes"]) > 1)
    f0["boxes"][0] = [50.0, 50.0, 10.0, 10.0]
    by_key = {r.key: r for r in masked}
    report = evaluate_predictions(by_key, bad, invalid="skip", **FAST)
    assert report["invalid_predictions"]["skipped_boxes"] == 1 and "mask_mIoU" in report["metrics"]


def test_a_predicted_mask_of_the_wrong_size_or_count_names_clip_and_frame(case):
    _, masked, _, masked_preds = case
    by_key = {r.key: r for r in masked}
    key = next(k for k, p in masked_preds.items() if p["frames"])
    bad = json.loads(json.dumps(masked_preds))
    frame = bad[key]["frames"][0]
    frame["masks"] = [{"size": [10, 10], "counts": "PX2"}] + frame["masks"][1:]
    with pytest.raises(InvalidPredictionError, match=f"clip '{key}', frame {frame['frame']}.*masks"):
        evaluate_predictions(by_key, bad, **FAST)
    frame["masks"] = frame["masks"][1:] + [None, None]
    with pytest.raises(GroundingInputError, match=f"clip '{key}', frame {frame['frame']}.*masks"):
        evaluate_predictions(by_key, bad, **FAST)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_file_whose_masks_are_all_null_is_reported_not_scored_as_zero(case, tmp_path, seed):
    records, masked, preds, masked_preds = case
    rng = np.random.default_rng(seed)
    nulled = json.loads(json.dumps(masked_preds))
    for pred in nulled.values():
        for f in pred["frames"]:
            if rng.random() < 0.3:
                f.pop("masks")  # absent on some frames, null on the others
            else:
                f["masks"] = [None] * len(f["boxes"])
    gt, pred = _paths(tmp_path, masked, nulled, f"null{seed}")
    with pytest.warns(UserWarning, match="every mask is null"):
        report = evaluate_files(gt, pred, **FAST)
    assert not [k for k in report["metrics"] if k.startswith(("mask_", "gcg_"))]
    assert str(pred) in report["masks_unavailable"]
    assert "mask figures not available" in format_table(report)
    # One real mask anywhere makes the figures computable again, and the note goes away
    key = next(k for k, p in nulled.items() if any(f.get("boxes") for f in p["frames"]))
    frame = next(i for i, f in enumerate(nulled[key]["frames"]) if f.get("boxes"))
    nulled[key]["frames"][frame]["masks"] = masked_preds[key]["frames"][frame]["masks"]
    nulled[key]["frames"][frame]["masks"][0] = masked_preds[key]["frames"][frame]["masks"][0] or \
        encode_masks(np.ones((1, by_size(masked, key)[1], by_size(masked, key)[0]), dtype=bool))[0]
    gt, pred = _paths(tmp_path, masked, nulled, f"one{seed}")
    report = evaluate_files(gt, pred, **FAST)
    assert "mask_AP50" in report["metrics"] and report["masks_unavailable"] is None


def by_size(records, key):
    return next((r.width, r.height) for r in records if r.key == key)
