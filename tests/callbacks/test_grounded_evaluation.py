"""GroundedEvaluation's ``invalid`` option: a predicted box that cannot be right stops the
evaluation (default) or is skipped and counted, through the callback's Lightning hooks."""
import types

import numpy as np
import pytest

from callbacks.grounded_evaluation import GroundedEvaluation
from formats.records import GroundedRecord
from metrics.evaluator.prediction_validation import InvalidPredictionError

FAST = dict(text_encoder="exact", caption_metrics=(), capture=False, write_report=False)


def clip() -> GroundedRecord:
    """Frames 0 and 6 (30 fps), one 'a cup' box each."""
    return GroundedRecord(
        video_fname="v.mp4", video_id="v", clip_id="0", fps=30.0, clip_start_frame=0, clip_end_frame=11,
        width=100, height=80, caption="a cup", tagged_caption="<p>a cup</p>", phrases=["a cup"],
        bboxes=[np.array([[10.0, 10.0, 50.0, 50.0]]), np.array([[20.0, 20.0, 60.0, 60.0]])],
        labels=[["a cup"], ["a cup"]])


def prediction(first_frame_boxes) -> dict:
    frames = [{"frame": 6, "boxes": [[22.0, 20.0, 60.0, 60.0]], "labels": ["a cup"], "scores": [0.8]}]
    if first_frame_boxes:
        frames.insert(0, {"frame": 0, "boxes": first_frame_boxes, "labels": ["a cup"] * len(first_frame_boxes),
                          "scores": [0.9] * len(first_frame_boxes)})
    return {"caption": "a cup", "tagged_caption": "<p>a cup</p>", "phrases": ["a cup"], "frames": frames}


def run_validation(callback: GroundedEvaluation, pred: dict) -> dict[str, float]:
    """The callback's validation hooks on one batch; returns what it logs."""
    record = clip()
    datamodule = types.SimpleNamespace(datasets={"val": types.SimpleNamespace(records=[record])})
    trainer = types.SimpleNamespace(sanity_checking=False, is_global_zero=True, fast_dev_run=False,
                                    datamodule=datamodule)
    logged = {}
    module = types.SimpleNamespace(log=lambda name, value, **kw: logged.__setitem__(name, value))
    callback.on_validation_epoch_start(trainer, module)
    callback.on_validation_batch_end(trainer, module, {"predictions": {record.key: pred}}, None, 0)
    callback.on_validation_epoch_end(trainer, module)
    return logged


def test_invalid_box_stops_by_default_naming_clip_and_field():
    inverted = prediction([[50.0, 10.0, 10.0, 50.0]])  # x2 < x1
    with pytest.raises(InvalidPredictionError, match=r"clip 'v_0'.*frame 0.*field 'boxes'"):
        run_validation(GroundedEvaluation(**FAST), inverted)


def test_skip_drops_the_box_counts_it_and_scores_the_rest():
    skipped = run_validation(GroundedEvaluation(invalid="skip", **FAST), prediction([[50.0, 10.0, 10.0, 50.0]]))
    assert skipped.pop("val/invalid_boxes_skipped") == 1.0
    # what is left scores as the prediction without that box
    clean = run_validation(GroundedEvaluation(**FAST), prediction([]))
    assert clean and skipped == pytest.approx(clean, nan_ok=True)
    assert clean != run_validation(GroundedEvaluation(**FAST), prediction([[10.0, 10.0, 50.0, 50.0]]))


def test_unknown_policy_is_a_clear_error():
    with pytest.raises(ValueError, match=r"GroundedEvaluation: invalid must be one of \('error', 'skip'\)"):
        GroundedEvaluation(invalid="raise")
