"""Predictions that cannot be right are rejected naming clip, frame and field, or skipped and counted."""
import json

import numpy as np
import pytest

from formats.records import GroundedRecord, write_records_json
from metrics.commands.evaluate import main
from metrics.evaluator.evaluation import evaluate_files, evaluate_predictions, format_table
from metrics.evaluator.prediction_validation import InvalidPredictionError, validate_predictions
from metrics.grounded_caption_metric import GroundedCaptionMetrics

FAST = dict(text_encoder="exact", caption_metrics=(), capture=False)


def one_clip() -> GroundedRecord:
    """One clip of two frames (0 and 6 at 30 fps), 100x80, one GT box per frame labelled 'a cup'."""
    return GroundedRecord(
        video_fname="v.mp4", video_id="v", clip_id="0", fps=30.0, clip_start_frame=0, clip_end_frame=11,
        width=100, height=80, caption="a cup", tagged_caption="<p>a cup</p>", phrases=["a cup"],
        bboxes=[np.array([[10.0, 10.0, 50.0, 50.0]]), np.array([[20.0, 20.0, 60.0, 60.0]])],
        labels=[["a cup"], ["a cup"]])


def prediction(boxes0, labels0=("a cup",), scores0=(0.9,)) -> dict:
    return {"caption": "a cup", "tagged_caption": "<p>a cup</p>", "phrases": ["a cup"], "frames": [
        {"frame": 0, "boxes": [list(b) for b in boxes0], "labels": list(labels0), "scores": list(scores0)},
        {"frame": 6, "boxes": [[20.0, 20.0, 60.0, 60.0]], "labels": ["a cup"], "scores": [0.8]}]}


CASES = {
    "inverted": (prediction([[50.0, 10.0, 10.0, 50.0]]), "boxes", "inverted"),
    "nan": (prediction([[float("nan"), 10.0, 50.0, 50.0]]), "boxes", "non-finite"),
    "far outside": (prediction([[300.0, 10.0, 340.0, 50.0]]), "boxes", "far outside"),
    "beyond a frame size": (prediction([[-150.0, 10.0, 50.0, 50.0]]), "boxes", "far outside"),
    "label": (prediction([[10.0, 10.0, 50.0, 50.0]], labels0=("a knife",)), "labels", "a knife"),
    "score high": (prediction([[10.0, 10.0, 50.0, 50.0]], scores0=(1.5,)), "scores", "1.5"),
    "score nan": (prediction([[10.0, 10.0, 50.0, 50.0]], scores0=(float("nan"),)), "scores", "nan"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_invalid_box_is_rejected_naming_clip_frame_and_field(case):
    pred, field, detail = CASES[case]
    record = one_clip()
    with pytest.raises(InvalidPredictionError) as err:
        evaluate_predictions({record.key: record}, {record.key: pred}, **FAST)
    message = str(err.value)
    assert f"clip '{record.key}'" in message and "frame 0" in message and f"field '{field}'" in message
    assert detail in message


@pytest.mark.parametrize("case", sorted(CASES))
def test_skip_drops_the_box_and_counts_it(case):
    pred, field, _ = CASES[case]
    record = one_clip()
    report = evaluate_predictions({record.key: record}, {record.key: pred}, invalid="skip", **FAST)
    assert report["invalid_predictions"]["skipped_boxes"] == 1
    assert report["invalid_predictions"]["by_field"][field] == 1
    # what is left is the valid frame-6 box: scored as if the bad box had never been predicted
    clean = {**pred, "frames": [pred["frames"][1]]}
    assert report["metrics"] == evaluate_predictions({record.key: record}, {record.key: clean}, **FAST)["metrics"]
    assert "invalid predicted boxes skipped: 1" in format_table(report)


def test_valid_edge_cases_pass():
    """Slightly past the border, zero width, scores 0 and 1, phrases from tagged_caption only."""
    record = one_clip()
    pred = prediction([[-5.0, 10.0, 104.0, 50.0], [30.0, 30.0, 30.0, 40.0]], labels0=("a cup", "a cup"),
                      scores0=(0.0, 1.0))
    del pred["phrases"]
    checked, report = validate_predictions({record.key: pred}, {record.key: (100, 80)})
    assert report.skipped_boxes == 0 and checked[record.key] is pred


def test_inverted_box_no_longer_hides_a_false_positive():
    """Two GT boxes, each found once; a third (inverted) box: AP would ignore it, so it is refused."""
    record = one_clip()
    pred = prediction([[10.0, 10.0, 50.0, 50.0], [90.0, 10.0, 60.0, 40.0]], labels0=("a cup", "a cup"),
                      scores0=(0.9, 0.95))
    with pytest.raises(InvalidPredictionError, match="inverted"):
        evaluate_predictions({record.key: record}, {record.key: pred}, score_source="objectness", **FAST)


def test_cli_invalid_option(tmp_path, capsys):
    record = one_clip()
    gt = write_records_json([record], tmp_path / "gt.json")
    p = tmp_path / "pred.json"
    p.write_text(json.dumps({record.key: CASES["label"][0]}))
    with pytest.raises(SystemExit, match="field 'labels'"):
        main(["--gt", str(gt), "--pred", str(p), "--text-encoder", "exact", "--caption-metrics", "", "--no-capture"])
    report = main(["--gt", str(gt), "--pred", str(p), "--text-encoder", "exact", "--caption-metrics", "",
                   "--no-capture", "--invalid", "skip"])
    assert report["invalid_predictions"]["by_field"]["labels"] == 1
    assert "invalid predicted boxes skipped: 1 (labels: 1)" in capsys.readouterr().out
    assert evaluate_files(gt, p, invalid="skip", **FAST)["invalid_predictions"]["skipped_boxes"] == 1


def test_validation_metric_rejects_or_counts():
    record = one_clip()
    metric = GroundedCaptionMetrics(references=[record], text_encoder="exact", caption_metrics=(), capture=False)
    metric.update({record.key: CASES["score high"][0]})
    with pytest.raises(InvalidPredictionError, match="field 'scores'"):
        metric.compute()
    lenient = GroundedCaptionMetrics(references=[record], text_encoder="exact", caption_metrics=(), capture=False,
                                     invalid="skip")
    lenient.update({record.key: CASES["score high"][0]})
    assert lenient.compute()["invalid_boxes_skipped"] == 1.0
