"""The judge's reference-free score of predicted captions, as added to an evaluation report."""
import math

import pytest

from datamodules.records import read_records
from judge.scoring import judge_report
from tests.judge.judge_fixtures import ScriptedJudge


def test_report_averages_the_parsed_scores_of_the_predicted_captions(tiny_synthetic_root):
    records = {r.key: r for r in read_records(tiny_synthetic_root / "annotations" / "test.json")}
    keys = sorted(records)
    predictions = {keys[0]: {"caption": "a red circle."}, keys[1]: {"caption": "a red square moves up."},
                   "not_in_gt": {"caption": "x"}}
    judge = ScriptedJudge(lambda c: "4\n\nok" if "circle" in c else "2\n\nwrong")
    report = judge_report(records, predictions, judge, str(tiny_synthetic_root / "videos"), num_frames=4)
    assert report["vc_inspector"] == pytest.approx(3.0) and report["vc_inspector_clips"] == 2
    assert report["vc_inspector_unparsable"] == 0.0 and report["vc_inspector_video_errors"] == 0
    assert sorted(judge.calls[0]) == ["a red circle.", "a red square moves up."]

    predictions[keys[1]] = {"caption": "  "}
    report = judge_report(records, predictions, ScriptedJudge(lambda c: "no score"),
                          str(tiny_synthetic_root / "videos"), num_frames=4)
    assert math.isnan(report["vc_inspector"]) and report["vc_inspector_unparsable"] == 1.0
    assert report["vc_inspector_without_caption"] == 1
