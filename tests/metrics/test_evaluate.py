"""Offline evaluator: every GT layout gives the same report; missing/extra clips; threshold filter;
unreadable GT files are named, skipped and counted."""
import json

import numpy as np
import pytest

from formats.records import RecordError, write_records_json, write_records_pickle, write_records_pickle_folder
from formats.safe_pickle import CorruptPickleError, safe_load
from metrics.commands.evaluate import main
from metrics.evaluator.evaluation import distinct_share, evaluate_files, filter_by_objectness, format_table
from tests.fixtures.metric_records import random_dataset

FAST = dict(text_encoder="exact", caption_metrics=(), capture=False)


def valid_predictions(preds: dict) -> dict:
    """The noisy fixture's predictions made valid: corners ordered, labels among the predicted phrases."""
    out = {}
    for key, pred in preds.items():
        frames = []
        for f in pred["frames"]:
            b = np.asarray(f["boxes"], dtype=float).reshape(-1, 4)
            b = np.concatenate([np.minimum(b[:, :2], b[:, 2:]), np.maximum(b[:, :2], b[:, 2:])], axis=1)
            labels = [l if l in pred["phrases"] else pred["phrases"][0] for l in f["labels"]]
            frames.append({**f, "boxes": b.tolist(), "labels": labels})
        out[key] = {**pred, "frames": frames}
    return out


@pytest.fixture()
def files(tmp_path):
    records, preds = random_dataset(seed=3, n=6)
    preds = valid_predictions(preds)
    paths = {
        "json": write_records_json(records, tmp_path / "gt.json"),
        "pickle": write_records_pickle(records, tmp_path / "gt.pkl"),
        "folder": write_records_pickle_folder(records, tmp_path / "gt_folder"),
    }
    pred_path = tmp_path / "pred.json"
    pred_path.write_text(json.dumps(preds))
    return records, preds, paths, pred_path


def test_same_report_for_every_layout(files):
    _, _, paths, pred_path = files
    reports = {name: evaluate_files(p, pred_path, **FAST) for name, p in paths.items()}
    assert reports["json"] == reports["pickle"] == reports["folder"]
    assert {"AP50", "mIoU", "recall", "AP50_frame", "mIoU_frame", "recall_frame"} <= set(reports["json"]["metrics"])


def test_missing_clips_count_as_empty_and_extra_are_listed(files, tmp_path):
    records, preds, paths, _ = files
    dropped = records[2].key
    partial = {k: v for k, v in preds.items() if k != dropped}
    partial["not_a_clip"] = preds[records[0].key]
    p = tmp_path / "partial.json"
    p.write_text(json.dumps(partial))
    report = evaluate_files(paths["json"], p, **FAST)
    assert report["missing_predictions"] == [dropped]
    assert report["ignored_predictions"] == ["not_a_clip"]
    explicit = dict(partial)
    del explicit["not_a_clip"]
    explicit[dropped] = {"caption": "", "phrases": [], "frames": []}
    q = tmp_path / "explicit.json"
    q.write_text(json.dumps(explicit))
    got = evaluate_files(paths["json"], q, **FAST)["metrics"]
    assert report["metrics"].pop("num_pred_clips_ignored") == 1 and got.pop("num_pred_clips_ignored") == 0
    assert got == pytest.approx(report["metrics"], rel=1e-12)  # the empty clip is reduced in another batch
    assert dropped in format_table(report)


def test_objectness_threshold_filter(files, tmp_path):
    _, preds, paths, pred_path = files
    filtered = {k: filter_by_objectness(v, 0.6) for k, v in preds.items()}
    assert all(s >= 0.6 for v in filtered.values() for f in v["frames"] for s in f["scores"])
    q = tmp_path / "filtered.json"
    q.write_text(json.dumps(filtered))
    assert (evaluate_files(paths["json"], pred_path, objectness_threshold=0.6, **FAST)["metrics"]
            == evaluate_files(paths["json"], q, **FAST)["metrics"])


def test_cli_writes_report(files, tmp_path, capsys):
    _, _, paths, pred_path = files
    out = tmp_path / "report.json"
    main(["--gt", str(paths["folder"]), "--pred", str(pred_path), "--level", "frame", "--text-encoder", "exact",
          "--caption-metrics", "", "--no-capture", "--out", str(out)])
    report = json.loads(out.read_text())
    assert "AP50_frame" in report["metrics"] and "AP50" not in report["metrics"]
    assert "AP50_frame" in capsys.readouterr().out


def test_distinct_captions_share(files, tmp_path):
    assert distinct_share([]) == 0.0
    assert distinct_share(["A red  circle.", "a red circle.", "a blue square."]) == 2 / 3
    records, preds, paths, _ = files
    same = {k: {**v, "caption": "one caption for every clip"} for k, v in preds.items()}
    q = tmp_path / "same.json"
    q.write_text(json.dumps(same))
    with_captions = dict(FAST, capture=True)  # CAPTURE with the exact encoder: no Java, no model
    assert evaluate_files(paths["json"], q, **with_captions)["metrics"]["distinct_captions"] == 1 / len(records)
    assert "distinct_captions" not in evaluate_files(paths["json"], q, **FAST)["metrics"]  # grounding only


def test_corrupt_pickle_names_the_file(tmp_path):
    bad = tmp_path / "truncated.pkl"
    bad.write_bytes(b"\x80\x04\x95\x10\x00\x00")
    with pytest.raises(CorruptPickleError, match="truncated.pkl"):
        safe_load(bad)


def test_corrupt_file_in_gt_folder_is_skipped_and_counted(files, tmp_path):
    records, _, paths, pred_path = files
    folder = paths["folder"]
    victim = folder / f"{records[1].key}.pkl"
    victim.write_bytes(victim.read_bytes()[:20])  # truncated
    report = evaluate_files(folder, pred_path, **FAST)
    assert len(report["corrupt_ground_truth"]) == 1 and str(victim) in report["corrupt_ground_truth"][0]
    assert report["ignored_predictions"] == [records[1].key]  # its prediction has no GT left
    assert "unreadable ground-truth files skipped: 1" in format_table(report)
    with pytest.raises(RecordError, match=str(victim)):
        evaluate_files(folder, pred_path, on_corrupt="raise", **FAST)


def test_corrupt_single_gt_file_is_an_error_naming_it(files, tmp_path):
    _, _, paths, pred_path = files
    bad = tmp_path / "all.pkl"
    bad.write_bytes(paths["pickle"].read_bytes()[:50])
    with pytest.raises(RecordError, match="all.pkl"):
        evaluate_files(bad, pred_path, **FAST)
    with pytest.raises(SystemExit, match="all.pkl"):
        main(["--gt", str(bad), "--pred", str(pred_path), "--text-encoder", "exact", "--caption-metrics", "",
              "--no-capture"])


def test_capture_conventions_option(files, tmp_path):
    _, preds, paths, pred_path = files  # every predicted caption equals its GT caption
    with_capture = dict(FAST, capture=True)
    project = evaluate_files(paths["json"], pred_path, capture_conventions="project", **with_capture)
    default = evaluate_files(paths["json"], pred_path, **with_capture)
    assert project["metrics"]["CAPTURE"] == pytest.approx(1.0)  # an empty type on both sides scores 1 there
    assert default["settings"]["capture_conventions"] == "default"
    report = main(["--gt", str(paths["json"]), "--pred", str(pred_path), "--text-encoder", "exact",
                   "--caption-metrics", "", "--capture-conventions", "project"])
    assert report["metrics"]["CAPTURE"] == pytest.approx(1.0)


def test_capture_stop_words_option(files):
    _, _, paths, pred_path = files
    with_capture = dict(FAST, capture=True)
    assert evaluate_files(paths["json"], pred_path, **with_capture)["settings"]["capture_stop_words"] == "authors"
    report = main(["--gt", str(paths["json"]), "--pred", str(pred_path), "--text-encoder", "exact",
                   "--caption-metrics", "", "--capture-stop-words", "project"])
    assert report["settings"]["capture_stop_words"] == "project" and 0 <= report["metrics"]["CAPTURE"] <= 1



def test_duplicate_clip_keys_are_errors_naming_the_key(files, tmp_path):
    records, preds, paths, pred_path = files
    key = records[2].key
    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps({"records": [r.to_dict() for r in records] + [records[2].to_dict()]}))
    with pytest.raises(RecordError, match=f"clip key '{key}' appears twice \\(in .*twice.json\\)"):
        evaluate_files(twice, pred_path, **FAST)
    folder = paths["folder"]  # the same clip in a second file of a per-key folder
    write_records_json([records[2]], folder / "extra.json")
    with pytest.raises(RecordError, match=f"clip key '{key}' appears twice \\(in .*extra.json and in .*{key}.pkl\\)"):
        evaluate_files(folder, pred_path, **FAST)
    text = pred_path.read_text()
    repeated = tmp_path / "repeated.json"  # JSON keeps the last of two equal keys: refuse instead
    repeated.write_text(text[:-1] + f', "{key}": ' + json.dumps(preds[key]) + "}")
    with pytest.raises(ValueError, match=f"repeated.json: key '{key}' appears twice"):
        evaluate_files(paths["json"], repeated, **FAST)


def test_non_numeric_scores_name_file_clip_and_field(files, tmp_path):
    records, preds, paths, _ = files
    key = records[0].key
    bad = json.loads(json.dumps(preds))
    frame = next(f for f in bad[key]["frames"] if f["boxes"])
    frame["scores"] = ["high"] * len(frame["boxes"])
    path = tmp_path / "words.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(ValueError, match=f"words.json, clip '{key}', frame {frame['frame']}.*field 'scores'.*'high'"):
        evaluate_files(paths["json"], path, **FAST)


def test_out_that_is_an_input_is_refused(files, tmp_path):
    _, _, paths, pred_path = files
    for out, option in ((paths["json"], "--gt"), (pred_path, "--pred"), (paths["folder"] / "report.json", "--gt")):
        before = {p: p.read_bytes() for p in (paths["json"], pred_path)}
        with pytest.raises(SystemExit, match=f"--out {out} (is|lies inside) {option}"):
            main(["--gt", str(paths["folder"] if out.parent == paths["folder"] else paths["json"]),
                  "--pred", str(pred_path), "--text-encoder", "exact", "--caption-metrics", "", "--no-capture",
                  "--out", str(out)])
        assert before == {p: p.read_bytes() for p in before} and not (paths["folder"] / "report.json").exists()


def test_over_long_caption_fails_that_clip_only(files, tmp_path, monkeypatch):
    import metrics.functional.captioning as captioning

    records, preds, paths, _ = files
    monkeypatch.setattr(captioning, "METEOR_MAX_CHARS", 200)
    import metrics.evaluator.evaluation as evaluation

    monkeypatch.setattr(evaluation, "METEOR_MAX_CHARS", 200)
    key = records[1].key
    long = {**preds, key: {**preds[key], "caption": "word " * 100}}
    path = tmp_path / "long.json"
    path.write_text(json.dumps(long))
    report = evaluate_files(paths["json"], path, text_encoder="exact", caption_metrics=("METEOR",), capture=False)
    assert report["over_long_captions"] == [key]
    assert 0.0 < report["metrics"]["METEOR"] <= 1.0  # the rest is scored
    assert f"left out of METEOR and CAPTURE: 1: {key}" in format_table(report)
    rest = {k: v for k, v in preds.items() if k != key}
    from metrics.functional.captioning import evaluate_captions

    alone = evaluate_captions({k: [r.caption] for r in records if (k := r.key) != key},
                              {k: v["caption"] for k, v in rest.items()}, metrics=("METEOR",))
    assert report["metrics"]["METEOR"] == pytest.approx(alone["METEOR"])


@pytest.mark.parametrize("layout", ["empty.jsonl", "empty.json", "empty.pkl"])
def test_empty_ground_truth_is_an_error_naming_the_file(tmp_path, capsys, layout):
    gt = tmp_path / layout
    if layout.endswith(".pkl"):
        import pickle

        gt.write_bytes(pickle.dumps([]))
    else:
        gt.write_text("" if layout.endswith(".jsonl") else json.dumps({"records": []}))
    pred = tmp_path / "pred.json"
    pred.write_text("{}")
    with pytest.raises(SystemExit) as exit_:
        main(["--gt", str(gt), "--pred", str(pred), "--text-encoder", "exact", "--caption-metrics", "",
              "--no-capture"])
    message = str(exit_.value.code)
    assert message.startswith(f"error: {gt}: the ground truth holds no clip") and "\n" not in message


def test_ground_truth_that_is_not_utf8_names_the_line(files, tmp_path):
    lines = [json.dumps({"caption": "stir"}), json.dumps({"caption": "caf\u00e9"}).replace("\\u00e9", "\u00e9")]
    gt = tmp_path / "gt.jsonl"
    gt.write_bytes(lines[0].encode() + b"\n" + lines[1].encode("latin-1") + b"\n")
    with pytest.raises(SystemExit) as exit_:
        main(["--gt", str(gt), "--pred", str(files[3]), "--text-encoder", "exact", "--caption-metrics", "",
              "--no-capture"])
    assert str(exit_.value.code) == (f"error: {gt}, line 2: not UTF-8 text (byte 0xe9 at column 17); "
                                     "save the file as UTF-8")
