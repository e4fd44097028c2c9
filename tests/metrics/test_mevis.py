"""MeViS protocol on a tiny split written in the distributed layout (meta_expressions.json, mask_dict.json
with COCO RLEs and nulls, JPEGImages/): J, F and J&F equal the per-pixel oracle averaged as MeViS's
script does, for predictions in the project's JSON and in MeViS's PNG layout alike."""
from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from formats.mask_rle import encode_masks
from metrics.commands.mevis import main
from metrics.protocols.mevis import (
    MevisFormatError,
    evaluate_mevis,
    json_prediction_masks,
    read_mask_dict,
    read_mevis_expressions,
)
from tests.metrics.test_region_contour import oracle_f, oracle_j

H, W, T = 18, 24, 4
FRAMES = [f"{i:05d}" for i in range(T)]


def _blob(rng):
    yy, xx = np.mgrid[:H, :W]
    cx, cy, r = rng.uniform(0, W), rng.uniform(0, H), rng.uniform(2, 7)
    return (xx - cx) ** 2 + (yy - cy) ** 2 <= r * r


def write_split(root, rng):
    """Two videos; expressions naming one object, two objects, and one object absent in some frames."""
    objects = {str(a): [_blob(rng) if rng.random() > 0.25 else None for _ in FRAMES] for a in range(4)}
    mask_dict = {a: [encode_masks(m)[0] if m is not None else None for m in masks] for a, masks in objects.items()}
    meta = {"videos": {
        "vidA": {"frames": FRAMES, "expressions": {
            "0": {"exp": "the dog running left", "obj_id": [0], "anno_id": [0]},
            "1": {"exp": "two dogs playing", "obj_id": [0, 1], "anno_id": [0, 1]}}},
        "vidB": {"frames": FRAMES, "expressions": {
            "0": {"exp": "the cat that jumps", "obj_id": [2], "anno_id": [2]},
            "1": {"exp": "the bird flying away", "obj_id": [3], "anno_id": [3]}}},
    }}
    root.mkdir(parents=True, exist_ok=True)
    (root / "meta_expressions.json").write_text(json.dumps(meta))
    (root / "mask_dict.json").write_text(json.dumps(mask_dict))
    for video in meta["videos"]:
        (root / "JPEGImages" / video).mkdir(parents=True)
        for name in FRAMES:
            Image.fromarray(np.zeros((H, W, 3), np.uint8)).save(root / "JPEGImages" / video / f"{name}.jpg")
    truth = {"vidA_0": [objects["0"]], "vidA_1": [objects["0"], objects["1"]], "vidB_0": [objects["2"]],
             "vidB_1": [objects["3"]]}
    def union(objs, t):
        present = [o[t] for o in objs if o[t] is not None]
        return np.any(present, axis=0) if present else np.zeros((H, W), bool)

    return {k: np.stack([union(objs, t) for t in range(T)]) for k, objs in truth.items()}


def predictions(rng, truth):
    """Noisy masks for every expression but vidB_1 (missing); the JSON and PNG forms of the same masks."""
    masks = {}
    for key, gt in truth.items():
        if key == "vidB_1":
            continue
        noisy = gt ^ (rng.random(gt.shape) < 0.05)
        noisy[1] = np.roll(gt[1], 2, axis=1)
        noisy[2] = False
        masks[key] = noisy
    as_json = {}
    for key, m in masks.items():
        frames = []
        for t in range(T):
            if not m[t].any():
                continue  # a frame not listed is an empty mask
            halves = np.stack([m[t] & (np.arange(W) < W // 2), m[t] & (np.arange(W) >= W // 2)])
            frames.append({"frame": t, "boxes": [[0, 0, 1, 1], [0, 0, 1, 1]], "labels": ["x", "x"],
                           "masks": encode_masks(halves)})  # the union of the two halves is the mask
        as_json[key] = {"caption": "", "frames": frames}
    return masks, as_json


@pytest.fixture()
def split(tmp_path):
    rng = np.random.default_rng(0)
    truth = write_split(tmp_path / "valid_u", rng)
    masks, as_json = predictions(rng, truth)
    pred_json = tmp_path / "pred.json"
    pred_json.write_text(json.dumps(as_json))
    png = tmp_path / "png"
    for key, m in masks.items():
        video, exp = key.split("_")
        (png / video / exp).mkdir(parents=True, exist_ok=True)
        for t, name in enumerate(FRAMES):
            Image.fromarray((m[t] * 255).astype(np.uint8)).save(png / video / exp / f"{name}.png")
    return tmp_path / "valid_u", truth, masks, pred_json, png


def oracle(truth, masks):
    j, f = [], []
    for key, gt in truth.items():
        if key not in masks:
            j.append(0.0)
            f.append(0.0)
            continue
        j.append(np.mean([oracle_j(gt[t], masks[key][t]) for t in range(T)]))
        f.append(np.mean([oracle_f(gt[t], masks[key][t]) for t in range(T)]))
    return {"J": np.mean(j), "F": np.mean(f), "J&F": (np.mean(j) + np.mean(f)) / 2}


def test_figures_equal_the_oracle_for_json_and_png_predictions(split, tmp_path):
    folder, truth, masks, pred_json, png = split
    want = oracle(truth, masks)
    for pred in (pred_json, png):
        got = main(["--split", str(folder), "--pred", str(pred), "--out", str(tmp_path / "report.json")])
        for name in ("J", "F", "J&F"):
            assert got[name] == pytest.approx(want[name], abs=1e-12), (pred, name)
        assert got["num_expressions"] == 4 and got["num_missing"] == 1
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["per_expression"]["vidB_1"] == {"J": 0.0, "F": 0.0, "J&F": 0.0}


def test_reader_fields_and_errors(split):
    folder, *_ = split
    expressions = read_mevis_expressions(folder / "meta_expressions.json")
    assert [e.key for e in expressions] == ["vidA_0", "vidA_1", "vidB_0", "vidB_1"]
    assert expressions[1].anno_ids == ("0", "1") and expressions[1].text == "two dogs playing"
    masks = read_mask_dict(folder / "mask_dict.json")
    broken = {**masks, "1": masks["1"][:2]}
    with pytest.raises(MevisFormatError, match="vidA.*expression '1'.*annotation '1' has 2 masks for 4 frames"):
        evaluate_mevis(expressions, broken, lambda e, s: None)
    bad = json.loads((folder / "meta_expressions.json").read_text())
    del bad["videos"]["vidB"]["expressions"]["0"]["anno_id"]
    (folder / "meta_expressions.json").write_text(json.dumps(bad))
    with pytest.raises(MevisFormatError, match="meta_expressions.json, video 'vidB', expression '0'"):
        read_mevis_expressions(folder / "meta_expressions.json")
    off = json_prediction_masks({"vidA_0": {"frames": [{"frame": 9, "masks": []}]}}, "pred.json")
    with pytest.raises(MevisFormatError, match="pred.json, clip 'vidA_0': frame 9"):
        off(expressions[0], (H, W))
