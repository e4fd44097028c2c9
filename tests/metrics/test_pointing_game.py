"""metrics.protocols.pointing against the released pointing-game rule, on hand cases and randomised ones."""
from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from formats.pointing_records import pointing_record, read_pointing_records
from formats.records import RecordError
from metrics.commands.pointing import main
from metrics.protocols.pointing import PointingInputError, evaluate_files, pointing_accuracy


def released_rule(predictions: dict, gt_entries: list, dataset: str, centre_dtype=None) -> tuple[float, int, int]:
    """The rule of the released eval_youcookinteractions.py, restated as a plain loop (the reference):
    a missing clip fails (``[].get``), predictions and seconds pair up as far as both go, an empty
    GT value is skipped, a None or NaN-holding prediction is a counted miss, the first box's
    centre must lie inside the GT box, borders included. The centre is computed on numpy scalars
    in the prediction's own dtype and compared in float64 (numpy 1.26.4, the script's numpy, does
    so for a float32 scalar against a Python float; numpy 2 would compare in float32, hence the
    explicit ``float``). ``centre_dtype`` forces another dtype for the centre (to show it matters)."""
    correct = valid = 0
    for entry in gt_entries:
        key = f"{entry['video_id']}_{entry[f'segment_{dataset}_idx']}"
        boxes = predictions.get(key, []).get("final_boxes", [])  # AttributeError for a missing clip
        for pred, gt in zip(boxes, entry["segment_bboxes"]):
            if not gt:
                continue
            x1, y1, x2, y2 = gt
            valid += 1
            if pred is None or np.any(np.isnan(pred)):
                continue
            first = pred[0] if centre_dtype is None else np.asarray(pred[0], dtype=centre_dtype)
            cx, cy = float((first[0] + first[2]) / 2), float((first[1] + first[3]) / 2)
            if float(x1) <= cx <= float(x2) and float(y1) <= cy <= float(y2):
                correct += 1
    return (correct / valid * 100 if valid else 0.0), correct, valid


def gt_entry(video_id: str, segment: int, boxes: list, dataset: str = "youcook") -> dict:
    seconds = "secs_relative" if dataset == "youcook" else "secs_absolute"
    return {"video_id": video_id, "video_fname": f"{video_id}.mp4", "caption": "stir the soup",
            "pts": [0.0, 0.5, 1.0], seconds: list(range(len(boxes))), "fps": 30.0, "width": 100, "height": 80,
            f"segment_{dataset}_idx": segment, "segment_bboxes": boxes}


def records_of(entries, dataset="youcook"):
    return [pointing_record(e, dataset, f"case record {i}") for i, e in enumerate(entries)]


def box_centred(cx, cy, half=3.0):
    return np.array([[cx - half, cy - half, cx + half, cy + half]], dtype=np.float32)


def test_hand_case_borders_nan_and_empty_gt():
    gt = [gt_entry("v", 1, [[10, 10, 20, 20], None, [10, 10, 20, 20], [], [10, 10, 20, 20], [0, 0, 5, 5]])]
    preds = {"v_1": {"final_boxes": [
        box_centred(20, 10),         # centre on the GT corner: inside (borders count)
        box_centred(50, 50),         # GT empty: not counted
        box_centred(20.5, 15),       # just outside
        box_centred(15, 15),         # GT empty ([]): not counted
        None,                        # no prediction: a counted miss
        np.array([[1, 1, np.nan, 3]], dtype=np.float32),  # NaN: a counted miss
    ]}}
    report = pointing_accuracy(records_of(gt), preds)
    assert (report["correct"], report["valid"]) == (1, 4)
    assert report["accuracy"] == pytest.approx(25.0)
    assert released_rule(preds, gt, "youcook") == (25.0, 1, 4)


def test_short_prediction_list_counts_only_paired_seconds():
    gt = [gt_entry("v", 0, [[0, 0, 10, 10]] * 4)]
    preds = {"v_0": {"final_boxes": [box_centred(5, 5)]}}
    report = pointing_accuracy(records_of(gt), preds)
    assert (report["correct"], report["valid"], report["unscored_seconds"]) == (1, 1, 3)
    assert released_rule(preds, gt, "youcook")[1:] == (1, 1)


def test_missing_clip_counts_as_misses_or_is_refused():
    gt = [gt_entry("a", 0, [[0, 0, 10, 10], None]), gt_entry("b", 2, [[0, 0, 10, 10], [0, 0, 4, 4]])]
    preds = {"a_0": {"final_boxes": [box_centred(5, 5), None]}, "zzz_9": {"final_boxes": []}}
    with pytest.raises(AttributeError):  # the released script stops here
        released_rule(preds, gt, "youcook")
    report = pointing_accuracy(records_of(gt), preds)
    assert (report["correct"], report["valid"], report["missing_clips"]) == (1, 3, 1)
    assert report["missing_examples"] == ["b_2"] and report["extra_predictions"] == 1
    with pytest.raises(PointingInputError, match="b_2"):
        pointing_accuracy(records_of(gt), preds, missing="error")


def test_entry_forms_flat_box_and_empty_entry():
    gt = [gt_entry("v", 0, [[0, 0, 10, 10]] * 3)]
    preds = {"v_0": {"final_boxes": [[4, 4, 6, 6], np.zeros((0, 4)), [[4, 4, 6, 6], [50, 50, 60, 60]]]}}
    report = pointing_accuracy(records_of(gt), preds)
    # a flat box is the one box; an entry without boxes is a miss; of several boxes the first counts
    assert (report["correct"], report["valid"]) == (2, 3)


def random_case(rng: np.random.Generator, dataset: str):
    """GT entries and released-style predictions with boxes on and off the edges, NaNs and empty GT."""
    entries, preds = [], {}
    for c in range(int(rng.integers(1, 8))):
        n = int(rng.integers(0, 7))
        boxes = []
        for _ in range(n):
            kind = rng.integers(0, 6)
            if kind == 0:
                boxes.append(None if rng.random() < 0.5 else [])
            else:
                x1, y1 = rng.integers(0, 60, size=2)
                w, h = rng.integers(0, 30, size=2)
                box = [float(x1), float(y1), float(x1 + w), float(y1 + h)]
                if kind == 1 and rng.random() < 0.2:
                    box[int(rng.integers(0, 4))] = float("nan")
                boxes.append(box)
        entries.append(gt_entry(f"vid{c % 3}", c, boxes, dataset))
        final = []
        for k in range(n + int(rng.integers(-1, 2)) if n else int(rng.integers(0, 2))):
            kind = rng.integers(0, 6)
            if kind == 0:
                final.append(None)
            elif kind == 1:
                b = rng.integers(0, 90, size=4).astype(np.float32)
                b[int(rng.integers(0, 4))] = np.nan
                final.append(b[None])
            elif kind == 5 and k < n and boxes[k] and not np.isnan(boxes[k]).any():
                # float32 box whose centre lies on a GT border in one precision only: the GT border is
                # the centre computed in float64, or the float32 centre, of non-integer coordinates
                a, b = np.float32(rng.uniform(0, 60)), np.float32(rng.uniform(0, 60))
                lo, hi = min(a, b), max(a, b)
                c64, c32 = (float(lo) + float(hi)) / 2, float((lo + hi) / 2)
                border = c64 if rng.random() < 0.5 else c32
                x1, y1, x2, y2 = boxes[k]
                if rng.random() < 0.5:
                    boxes[k][0] = border
                    boxes[k][2] = max(x2, border + 1)
                else:
                    boxes[k][2] = border
                    boxes[k][0] = min(x1, border - 1)
                cy = np.float32((y1 + y2) / 2)
                final.append(np.array([[lo, cy - 1, hi, cy + 1]], dtype=np.float32))
            elif kind == 2 and k < n and boxes[k]:  # centre exactly on a GT edge or corner
                x1, y1, x2, y2 = boxes[k]
                cx = [x1, x2][int(rng.integers(0, 2))]
                cy = [y1, y2][int(rng.integers(0, 2))] if rng.random() < 0.5 else (y1 + y2) / 2
                final.append(box_centred(cx, cy, float(rng.integers(0, 5))))
            else:
                x1, y1 = rng.integers(-20, 90, size=2)
                w, h = rng.integers(0, 40, size=2)
                final.append(np.array([[x1, y1, x1 + w, y1 + h]], dtype=np.float32))
        preds[f"vid{c % 3}_{c}"] = {"final_boxes": final, "selected_pts": [0.0] * len(final)}
    missing = [k for k in preds if rng.random() < 0.15]
    for k in missing:
        del preds[k]
    return entries, preds, missing


@pytest.mark.parametrize("dataset", ["youcook", "groundingyoutube"])
def test_randomised_parity_with_the_released_rule(dataset):
    rng = np.random.default_rng(0)
    seen_missing = precision_matters = 0
    for _ in range(300):
        entries, preds, missing = random_case(rng, dataset)
        report = pointing_accuracy(records_of(entries, dataset), preds)
        if missing:  # the released script fails; ours scores the missing clips' boxed seconds as misses
            seen_missing += 1
            with pytest.raises(AttributeError):
                released_rule(preds, entries, dataset)
            filled = {**preds, **{k: {"final_boxes": [None] * 10} for k in missing}}
            expected = released_rule(filled, entries, dataset)
        else:
            expected = released_rule(preds, entries, dataset)
        assert (report["correct"], report["valid"]) == expected[1:]
        assert report["accuracy"] == pytest.approx(expected[0])
        if not missing:
            precision_matters += released_rule(preds, entries, dataset, centre_dtype=np.float64) != expected
    assert seen_missing > 10
    assert precision_matters > 10  # centres on GT borders where float32 and float64 disagree were drawn


def test_centre_is_computed_in_the_predictions_dtype():
    lo, hi = np.float32(0.1), np.float32(0.7)
    c64 = (float(lo) + float(hi)) / 2
    c32 = float((lo + hi) / 2)
    assert c32 != c64
    box32 = np.array([[lo, 0, hi, 2]], dtype=np.float32)
    as_json = [[float(lo), 0.0, float(hi), 2.0]]
    for border, want32, want64 in ((c64, c32 >= c64, True), (c32, True, c64 >= c32)):
        gt = [gt_entry("v", 0, [[border, 0, border + 5, 2]])]
        assert pointing_accuracy(records_of(gt), {"v_0": {"final_boxes": [box32]}})["correct"] == want32
        assert pointing_accuracy(records_of(gt), {"v_0": {"final_boxes": [as_json]}})["correct"] == want64
        mixed = {"v_0": {"final_boxes": [box32, as_json]}}  # one entry of each kind: each in its own dtype
        gt2 = [gt_entry("v", 0, [[border, 0, border + 5, 2]] * 2)]
        assert pointing_accuracy(records_of(gt2), mixed)["correct"] == want32 + want64


def test_files_official_pickle_and_project_json(tmp_path, capsys):
    rng = np.random.default_rng(1)
    entries, preds, _ = random_case(rng, "youcook")
    while len(entries) < 3:
        entries, preds, _ = random_case(rng, "youcook")
    for e in entries:  # every clip predicted, so the released rule runs
        preds.setdefault(f"{e['video_id']}_{e['segment_youcook_idx']}", {"final_boxes": []})
    gt_path = tmp_path / "full_annotations.pkl"
    gt_path.write_bytes(pickle.dumps(entries))
    official = tmp_path / "result_youcookinteractions.pkl"
    official.write_bytes(pickle.dumps(preds))
    as_json = {k: {"final_boxes": [None if b is None else np.asarray(b).tolist() for b in v["final_boxes"]]}
               for k, v in preds.items()}
    json_path = tmp_path / "predictions_predict.json"
    json_path.write_text(json.dumps(as_json))
    expected = released_rule(preds, entries, "youcook")
    for path in (official, json_path):
        report = evaluate_files(gt_path, path, "youcook")
        assert (report["correct"], report["valid"]) == expected[1:]
    keys = sorted(preds)
    halves = []
    for k, part in enumerate((keys[::2], keys[1::2])):  # a two-process predict: one file per rank
        halves.append(tmp_path / f"predictions_predict.rank{k}.json")
        halves[-1].write_text(json.dumps({key: as_json[key] for key in part}))
    report = evaluate_files(gt_path, halves, "youcook", missing="error")
    assert (report["correct"], report["valid"]) == expected[1:]
    out = tmp_path / "report.json"
    main(["--gt", str(gt_path), "--pred", str(official), "--dataset", "youcook", "--out", str(out)])
    assert f"{expected[0]:.2f}%" in capsys.readouterr().out
    assert json.loads(out.read_text())["valid"] == expected[2]


def test_unsafe_or_wrong_files_are_refused(tmp_path):
    gt_path = tmp_path / "full_annotations.pkl"
    gt_path.write_bytes(pickle.dumps([gt_entry("v", 0, [[0, 0, 1, 1]])]))
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(pickle.dumps({"v_0": {"final_boxes": [], "x": pickle.PickleError}}))
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        evaluate_files(gt_path, evil, "youcook")
    grounded = tmp_path / "predictions_test.json"
    grounded.write_text(json.dumps({"v_0": {"caption": "x", "frames": []}}))
    with pytest.raises(PointingInputError, match="final_boxes"):
        evaluate_files(gt_path, grounded, "youcook")
    with pytest.raises(SystemExit):
        main(["--gt", str(gt_path), "--pred", str(grounded), "--dataset", "youcook"])


def test_reader_names_file_record_and_field(tmp_path):
    path = tmp_path / "full_annotations.pkl"
    bad = gt_entry("v", 0, [[0, 0, 1, 1]])
    del bad["pts"]
    path.write_bytes(pickle.dumps([gt_entry("v", 1, []), bad]))
    with pytest.raises(RecordError, match=r"full_annotations.pkl: record 1: missing field\(s\) \['pts'\]"):
        read_pointing_records(path, "youcook")
    path.write_bytes(pickle.dumps([gt_entry("v", 1, [], dataset="groundingyoutube")]))
    with pytest.raises(RecordError, match="--dataset groundingyoutube"):
        read_pointing_records(path, "youcook")
    path.write_bytes(pickle.dumps([gt_entry("v", 1, [[0, 0, 1]])]))
    with pytest.raises(RecordError, match=r"record 0: segment_bboxes\[0\] must be 4 numbers"):
        read_pointing_records(path, "youcook")


def test_duplicate_segments_in_the_gt_are_scored_each_time_and_reported(tmp_path, capsys):
    entry = gt_entry("v", 0, [[0, 0, 10, 10]])
    gt_path = tmp_path / "full_annotations.pkl"
    gt_path.write_bytes(pickle.dumps([entry, gt_entry("w", 1, [[0, 0, 10, 10]]), entry]))
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps({"v_0": {"final_boxes": [[[4, 4, 6, 6]]]}, "w_1": {"final_boxes": [None]}}))
    report = main(["--gt", str(gt_path), "--pred", str(pred), "--dataset", "youcook"])
    assert (report["correct"], report["valid"]) == (2, 3)  # the released script loops over the GT list
    assert released_rule({"v_0": {"final_boxes": [[[4, 4, 6, 6]]]}, "w_1": {"final_boxes": [None]}},
                         [entry, gt_entry("w", 1, [[0, 0, 10, 10]]), entry], "youcook")[1:] == (2, 3)
    assert (report["duplicate_clips"], report["duplicate_examples"]) == (1, ["v_0"])
    assert f"warning: {gt_path}: 1 segment(s) listed more than once" in capsys.readouterr().err


def test_a_clip_twice_in_a_predictions_json_is_an_error_naming_it(tmp_path, capsys):
    gt_path = tmp_path / "full_annotations.pkl"
    gt_path.write_bytes(pickle.dumps([gt_entry("v", 0, [[0, 0, 10, 10]])]))
    pred = tmp_path / "pred.json"
    pred.write_text('{"v_0": {"final_boxes": [null]}, "v_0": {"final_boxes": [[[4, 4, 6, 6]]]}}')
    with pytest.raises(SystemExit) as exit_:
        main(["--gt", str(gt_path), "--pred", str(pred), "--dataset", "youcook"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {pred}, key 'v_0': appears twice") and err.count("\n") == 1


def test_empty_gt_and_unsafe_gt_pickle_are_one_line_errors(tmp_path, capsys):
    pred = tmp_path / "pred.json"
    pred.write_text('{"v_0": {"final_boxes": [null]}}')
    empty = tmp_path / "full_annotations.pkl"
    empty.write_bytes(pickle.dumps([]))
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(pickle.dumps([{"video_id": pickle.PickleError}]))
    for gt_path, what in ((empty, "the ground truth holds no segment"), (evil, "refusing to unpickle")):
        with pytest.raises(SystemExit) as exit_:
            main(["--gt", str(gt_path), "--pred", str(pred), "--dataset", "youcook"])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {gt_path}") and what in err and err.count("\n") == 1
