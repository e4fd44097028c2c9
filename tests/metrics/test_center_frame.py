"""The "Center" set-up (GROVE paper, Table 2 rows a-c): the centre annotated frame, by hand."""
import json

import numpy as np
import pytest

from formats.records import GroundedRecord, write_records_json
from metrics.commands.evaluate import main
from metrics.evaluator.evaluation import evaluate_files, evaluate_predictions
from metrics.protocols.center_frame import centre_frame, centre_position, centre_prediction, centre_record

FAST = dict(text_encoder="exact", caption_metrics=(), capture=False)


def record(video_id, fps, start, end, frames: dict, phrases=("a man", "a dog")):
    """A record whose annotated frame ``f`` holds ``frames[f]`` = [(label, box)], the others nothing."""
    grid = list(range(start, end + 1, max(1, round(fps / 5))))
    boxes = [np.asarray([b for _, b in frames.get(f, [])], dtype=np.float32).reshape(-1, 4) for f in grid]
    labels = [[l for l, _ in frames.get(f, [])] for f in grid]
    tagged = " and ".join(f"<p>{p}</p>" for p in phrases)
    return GroundedRecord(video_fname=f"{video_id}.mp4", video_id=video_id, clip_id="0", fps=fps,
                          clip_start_frame=start, clip_end_frame=end, width=100, height=100,
                          caption=tagged.replace("<p>", "").replace("</p>", ""), tagged_caption=tagged,
                          phrases=list(phrases), bboxes=boxes, labels=labels)


def test_the_centre_frame_by_hand():
    assert [centre_position(n) for n in (1, 2, 3, 4, 9, 10)] == [0, 1, 1, 2, 4, 5]
    with pytest.raises(ValueError):
        centre_position(0)
    # 10 fps, frames 0..19: grid 0, 2, ..., 18 (10 frames) -> the 6th, frame 10 (the later middle one)
    assert centre_frame(record("a", 10.0, 0, 19, {})) == 10
    # 10 fps, frames 0..16: grid 0, 2, ..., 16 (9 frames) -> the 5th, frame 8
    assert centre_frame(record("b", 10.0, 0, 16, {})) == 8
    # 25 fps, frames 100..139: grid 100, 105, ..., 135 (8 frames) -> the 5th, frame 120
    assert centre_frame(record("c", 25.0, 100, 139, {})) == 120
    # 30 fps clip of one annotated frame
    assert centre_frame(record("d", 30.0, 7, 9, {})) == 7
    cut = centre_record(record("e", 25.0, 100, 139, {120: [("a man", [1, 2, 3, 4])], 125: [("a dog", [5, 5, 9, 9])]}))
    assert cut.frame_indices.tolist() == [120] and cut.labels == [["a man"]]
    assert cut.bboxes[0].tolist() == [[1, 2, 3, 4]]
    pred = {"caption": "x", "frames": [{"frame": 115, "boxes": [], "labels": []},
                                       {"frame": 120, "boxes": [[0, 0, 1, 1]], "labels": ["a man"]}]}
    assert centre_prediction(pred, 120) == {"caption": "x", "frames": [pred["frames"][1]]}
    assert centre_prediction(pred, 130)["frames"] == []  # no entry for the centre: predicted empty there


def hand_case():
    """Three clips. A: centre frame 10 (10 frames), its box found at IoU 0.8. B: centre frame 8
    (9 frames), its box missed (IoU 0). C: nothing annotated on its centre frame 4: out of the
    grounding averages. Off-centre frames hold GT boxes never predicted and predicted boxes
    nowhere in the GT, which the all-frame evaluation counts and the Center one must not."""
    records = [
        record("A", 10.0, 0, 19, {10: [("a man", [0, 0, 10, 10])], 0: [("a dog", [50, 50, 90, 90])],
                                  2: [("a man", [0, 0, 10, 10])]}),
        record("B", 10.0, 0, 16, {8: [("a dog", [20, 20, 40, 40])], 16: [("a man", [5, 5, 25, 25])]}),
        record("C", 10.0, 0, 8, {0: [("a man", [0, 0, 30, 30])], 8: [("a dog", [0, 0, 30, 30])]}),
    ]
    preds = {
        "A_0": {"caption": records[0].caption, "phrases": ["a man", "a dog"], "frames": [
            {"frame": 10, "boxes": [[0, 0, 10, 8]], "labels": ["a man"]},
            {"frame": 4, "boxes": [[60, 60, 70, 70]], "labels": ["a dog"]}]},
        "B_0": {"caption": records[1].caption, "phrases": ["a man", "a dog"], "frames": [
            {"frame": 8, "boxes": [[0, 0, 5, 5]], "labels": ["a dog"]},
            {"frame": 16, "boxes": [[5, 5, 25, 25]], "labels": ["a man"]}]},
        "C_0": {"caption": records[2].caption, "phrases": ["a man", "a dog"], "frames": [
            {"frame": 0, "boxes": [[0, 0, 30, 30]], "labels": ["a man"]}]},
    }
    return records, preds


def test_center_scores_by_hand():
    records, preds = hand_case()
    report = evaluate_predictions({r.key: r for r in records}, preds, level="center", **FAST)
    m = report["metrics"]
    assert m["num_videos"] == 2 and m["num_videos_excluded"] == 1  # C has no box on its centre frame
    assert m["num_gt_boxes"] == 2 and m["num_gt_frames"] == 2 and m["num_pred_boxes"] == 2
    assert m["AP50"] == pytest.approx((1.0 + 0.0) / 2)  # A: one TP; B: one FP, its GT missed
    assert m["mIoU"] == pytest.approx((0.8 + 0.0) / 2)
    assert m["recall"] == pytest.approx((1.0 + 0.0) / 2)
    assert "AP50_frame" not in m and report["settings"]["level"] == "center"
    every = evaluate_predictions({r.key: r for r in records}, preds, level="video", **FAST)["metrics"]
    assert every["num_gt_boxes"] == 7 and every["num_pred_boxes"] == 5  # every frame counts there
    assert every["AP50"] != m["AP50"]


def test_center_keeps_the_captions_and_runs_from_the_command_line(tmp_path):
    records, preds = hand_case()
    gt = write_records_json(records, tmp_path / "gt.json")
    pred = tmp_path / "pred.json"
    preds["B_0"]["caption"] = "a cat sleeps"
    pred.write_text(json.dumps(preds))
    metrics = ("BLEU-4", "ROUGE-L", "CIDEr")
    center = evaluate_files(gt, pred, level="center", text_encoder="exact", caption_metrics=metrics, capture=False)
    whole = evaluate_files(gt, pred, level="video", text_encoder="exact", caption_metrics=metrics, capture=False)
    for name in metrics:
        assert center["metrics"][name] == whole["metrics"][name]  # the caption is scored as it is
    from metrics.evaluator.evaluation import format_table

    assert "set-up: Center" in format_table(center) and "set-up" not in format_table(whole)
    out = tmp_path / "center.json"
    printed = main(["--gt", str(gt), "--pred", str(pred), "--level", "center", "--text-encoder", "exact",
                    "--caption-metrics", "", "--no-capture", "--out", str(out)])
    assert json.loads(out.read_text())["metrics"]["AP50"] == pytest.approx(0.5) == printed["metrics"]["AP50"]


def test_official_protocol_on_the_centre_frame():
    """The official protocol on the cut clips: pycocotools AP per clip, a clip without GT adding -1."""
    records, preds = hand_case()
    gt = {r.key: r for r in records}
    from metrics.evaluator.evaluation import evaluate_official
    from metrics.protocols.center_frame import centre_view

    cut_gt, cut_preds = centre_view(gt, preds)
    report = evaluate_official(cut_gt, cut_preds, "exact", caption_metrics=())
    assert report["metrics"]["AP50"] == pytest.approx((1.0 + 0.0 - 1.0) / 3)
