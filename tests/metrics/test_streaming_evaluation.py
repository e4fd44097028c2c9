"""The streaming evaluator: same figures as the whole-set evaluator, a file read clip by clip,
and predicted frames off the annotation grid treated as bad input."""
import json
import math

import numpy as np
import pytest

import formats.predictions as streaming
from formats.predictions import iter_prediction_file
from formats.records import write_records_json
from metrics.commands.evaluate import evaluate_files, main
from metrics.evaluator.evaluation import batched
from metrics.functional.frame_boxes import GroundingInputError
from metrics.functional.grounding import GroundingAccumulator, evaluate_grounding
from tests.fixtures.metric_records import random_dataset
from tests.metrics.test_grounding_metrics import random_case

FAST = dict(text_encoder="exact", caption_metrics=(), capture=False)


def _merged_cases(seeds):
    gt, pred = {}, {}
    for seed in seeds:
        g, p = random_case(seed)
        gt.update(g)
        pred.update(p)
    return gt, pred


@pytest.mark.parametrize("score_source", ["constant", "objectness"])
@pytest.mark.parametrize("batch", [1, 5, 1000])
def test_batches_in_any_order_give_the_whole_set_figures(score_source, batch):
    gt, pred = _merged_cases(range(40, 70))  # ~75 clips: off-grid frames, clips without GT or predictions
    whole = evaluate_grounding(gt, pred, text_encoder="exact", score_source=score_source)
    keys = list(gt)
    order = np.random.default_rng(batch).permutation(len(keys))  # clips stream in file order, not GT order
    acc = GroundingAccumulator("exact", score_source=score_source)
    for part in batched([keys[i] for i in order], batch):
        acc.add({k: gt[k] for k in part}, {k: pred[k] for k in part if k in pred},
                np.asarray([keys.index(k) for k in part]))
    got = acc.result(ignored_clips=whole["num_pred_clips_ignored"])
    assert set(got) == set(whole)
    for name, value in whole.items():
        assert (math.isnan(value) and math.isnan(got[name])) or got[name] == pytest.approx(value, abs=1e-12), name


def test_the_file_is_read_clip_by_clip_with_its_errors_named(tmp_path, monkeypatch):
    monkeypatch.setattr(streaming, "_CHUNK", 7)  # values cross many chunk boundaries
    data = {f"clip{i}": {"caption": "a é ☃ " * i, "frames": [{"frame": 5 * i, "boxes": [[1.5, 2, 3e2, 4]],
                                                             "labels": ["x"], "scores": [0.123456789]}]}
            for i in range(30)}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    assert dict(iter_prediction_file(path)) == data
    (tmp_path / "empty.json").write_text(" {} \n")
    assert list(iter_prediction_file(tmp_path / "empty.json")) == []
    cases = {'{"a": {"frames": []}, "a": {"frames": []}}': r"key 'a' appears twice in one JSON object",
             '{"a": {"frames": [], "frames": []}}': r"key 'frames' appears twice in one JSON object \(in clip 'a'\)",
             '[1, 2]': r"expected an object mapping clip keys to predictions, got list",
             '{"a": {"frames": []}} x': r"not valid JSON \(extra data after the predictions object at character 22",
             '{"a": {"frames": [}': r"not valid JSON \(Expecting value",
             '{"a": {"frames": []}': r"not valid JSON \(expected ',' or '}' after a clip's prediction, found the end"}
    for text, message in cases.items():
        (tmp_path / "bad.json").write_text(text)
        with pytest.raises(ValueError, match=rf"bad.json: {message}"):
            list(iter_prediction_file(tmp_path / "bad.json"))


def _shifted(tmp_path, shift):
    records, preds = random_dataset(seed=5, n=3)
    exact = {}
    for r in records:  # the ground truth itself as the prediction: AP50 1.0 on the grid
        frames = [{"frame": int(f) + shift, "boxes": np.asarray(b).reshape(-1, 4).tolist(), "labels": list(l)}
                  for f, b, l in zip(r.frame_indices, r.bboxes, r.labels)]
        exact[r.key] = {"caption": r.caption, "phrases": sorted({x for l in r.labels for x in l}), "frames": frames}
    gt = write_records_json(records, tmp_path / "gt.json")
    pred = tmp_path / f"pred_{shift}.json"
    pred.write_text(json.dumps(exact))
    return records, gt, pred


def test_frames_off_the_annotation_grid_are_named_or_mapped_when_asked(tmp_path, capsys):
    records, gt, on_grid = _shifted(tmp_path, 0)
    assert evaluate_files(gt, on_grid, **FAST)["metrics"]["AP50"] == 1.0
    _, _, shifted = _shifted(tmp_path, 1)
    first = next(r for r in records if any(len(b) for b in r.bboxes))  # the first clip in the file with boxes
    grid = set(int(f) for f in first.frame_indices)
    frames = [int(f) + 1 for f, b in zip(first.frame_indices, first.bboxes) if len(b) and int(f) + 1 not in grid]
    with pytest.raises(GroundingInputError, match=rf"clip '{first.key}': {len(frames)} predicted frame\(s\) with "
                                                  rf"boxes are not on the clip's annotation grid: {frames[0]}"):
        evaluate_files(gt, shifted, **FAST)
    with pytest.raises(SystemExit, match=r"--off-grid nearest"):
        main(["--gt", str(gt), "--pred", str(shifted), "--text-encoder", "exact", "--caption-metrics", "",
              "--no-capture"])
    report = evaluate_files(gt, shifted, off_grid="nearest", **FAST)
    assert report["metrics"]["AP50"] == 1.0 and report["off_grid_frames"]["clips"] == sum(
        any(len(b) for b in r.bboxes) for r in records)
    assert report["off_grid_frames"]["mapped_frames"] == sum(
        len(b) > 0 and int(f) + 1 not in set(map(int, r.frame_indices))
        for r in records for f, b in zip(r.frame_indices, r.bboxes))
