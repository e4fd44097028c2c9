"""The GROVE paper's GLaMM baselines: predictions for annotated synthetic clips from a tiny random
GLaMM (released layout, built here), in the prediction format, scored by ``grove evaluate``."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from formats.records import read_records
from metrics.commands.evaluate import main as evaluate_main
from tests.fixtures.official_glamm_state import save_loud_glamm_folder

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "official" / "glamm_tiny.yaml"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from datamodules.synthetic import generate_synthetic_dataset

    root = tmp_path_factory.mktemp("glamm_baseline")
    paths = generate_synthetic_dataset(root, num_train=0, num_val=0, num_test=2, seed=1, workers=1, duration_s=2.0)
    return {"videos": root / "videos", "gt": paths["test"], "glamm": save_loud_glamm_folder(root / "glamm")}


def _script(*argv: str) -> int:
    from glamm.commands import main

    return main(list(argv))


@pytest.mark.parametrize("level", ["frame", "video"])
def test_baseline_predictions_score_with_the_evaluator(data, tmp_path, level, capsys):
    out = tmp_path / f"glamm_{level}.json"
    assert _script("baseline", "--folder", str(data["glamm"]), "--config", str(TINY), "--gt", str(data["gt"]),
                   "--videos", str(data["videos"]), "--level", level, "--out", str(out), "--max-new-tokens", "6",
                   "--device", "cpu") == 0
    preds = json.loads(out.read_text())
    records = {r.key: r for r in read_records(data["gt"])}
    assert set(preds) == set(records)
    boxes = 0
    for key, pred in preds.items():
        record = records[key]
        assert [f["frame"] for f in pred["frames"]] == [int(i) for i in record.frame_indices]  # every annotated frame
        for frame in pred["frames"]:
            assert len(frame["boxes"]) == len(frame["labels"]) == len(frame["scores"])
            if level == "video":
                assert set(frame["labels"]) <= set(pred["phrases"])  # the centre frame's phrases only
            for x1, y1, x2, y2 in frame["boxes"]:
                assert 0 <= x1 < x2 <= record.width and 0 <= y1 < y2 <= record.height
            boxes += len(frame["boxes"])
    report = evaluate_main(["--gt", str(data["gt"]), "--pred", str(out), "--text-encoder", "exact",
                            "--caption-metrics", "", "--no-capture", "--out", str(tmp_path / "report.json")])
    assert report["num_clips"] == 2 and not report["missing_predictions"]
    assert {"AP50", "recall", "mIoU"} <= set(report["metrics"])
    assert "AP50" in capsys.readouterr().out


def test_teacher_forced_baseline_grounds_the_truth_caption(data, tmp_path):
    out = tmp_path / "tf.json"
    assert _script("baseline", "--folder", str(data["glamm"]), "--config", str(TINY), "--gt", str(data["gt"]),
                   "--videos", str(data["videos"]), "--teacher-forced", "--out", str(out), "--device", "cpu") == 0
    preds = json.loads(out.read_text())
    for key, record in ((r.key, r) for r in read_records(data["gt"])):
        assert preds[key]["phrases"] == list(record.phrases) and preds[key]["caption"] == record.caption
        assert any(frame["labels"] for frame in preds[key]["frames"])  # the loud tiny GLaMM's masks give boxes
    report = evaluate_main(["--gt", str(data["gt"]), "--pred", str(out), "--text-encoder", "exact",
                            "--caption-metrics", "", "--no-capture"])
    assert report["metrics"]["num_pred_boxes"] > 0


def test_center_baseline_is_glamm_on_the_centre_frame_alone(data, tmp_path):
    from formats.video_files import open_video
    from glamm.baseline import predict_records
    from glamm.model import GLaMM, frame_boxes
    from metrics.protocols.center_frame import centre_frame

    out = tmp_path / "center.json"
    assert _script("baseline", "--folder", str(data["glamm"]), "--config", str(TINY), "--gt", str(data["gt"]),
                   "--videos", str(data["videos"]), "--level", "center", "--out", str(out), "--max-new-tokens", "6",
                   "--device", "cpu") == 0
    records = {r.key: r for r in read_records(data["gt"])}
    assert {k: [f["frame"] for f in p["frames"]] for k, p in json.loads(out.read_text()).items()} == \
        {k: [centre_frame(r)] for k, r in records.items()}  # the 5-fps grid's g[N // 2] alone
    model = GLaMM.from_folder(data["glamm"], config=str(TINY), device="cpu")  # one model for both sides
    preds, skipped = predict_records(model, records, data["videos"], "center", max_new_tokens=6)
    assert not skipped
    for record in records.values():
        centre = centre_frame(record)
        pred = preds[record.key]
        with open_video(data["videos"], record.video_fname) as source:
            frame = source.read_frames([centre])
        direct = model.ground(frame, max_new_tokens=6)[0]
        assert pred["tagged_caption"] == direct.tagged_caption and pred["phrases"] == list(direct.phrases)
        labels, boxes, _ = frame_boxes(direct) if direct.phrases else ([], [], [])
        assert pred["frames"][0]["labels"] == labels and pred["frames"][0]["boxes"] == pytest.approx(boxes)
    report = evaluate_main(["--gt", str(data["gt"]), "--pred", str(out), "--level", "center", "--text-encoder",
                            "exact", "--caption-metrics", "", "--no-capture"])
    assert report["num_clips"] == 2 and report["settings"]["level"] == "center"
