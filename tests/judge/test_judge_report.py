"""The judge's reference-free score of predicted captions (``grove judge predictions``)."""
import json
import math

import pytest

from formats.records import read_records
from judge.application.scoring import judge_report
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


def test_predictions_command_scores_a_predictions_file(tiny_synthetic_root, tmp_path, monkeypatch, capsys):
    import judge.application.commands as commands
    from judge.application.loading import LoadedJudge

    gt = tiny_synthetic_root / "annotations" / "test.json"
    records = read_records(gt)
    preds = {r.key: {"caption": "a red circle." if i == 0 else "a blue star.", "tagged_caption": "", "phrases": [],
                     "frames": []} for i, r in enumerate(records)}
    pred_path = tmp_path / "pred.json"
    pred_path.write_text(json.dumps(preds))
    judge = ScriptedJudge(lambda c: "5\n\nfine" if "circle" in c else "1\n\nwrong")
    seen = {}

    def fake_load(spec, ckpt_path=None, overrides=()):
        seen.update(spec=spec, ckpt=ckpt_path)
        return LoadedJudge(judge=judge, num_frames=4)

    monkeypatch.setattr(commands, "load_judge", fake_load)
    out = tmp_path / "report.json"
    base = ["predictions", "--config", "configs/judge_demo.yaml", "--ckpt-path", "judge.ckpt", "--gt", str(gt),
            "--pred", str(pred_path), "--out", str(out), "--no-progress"]
    with pytest.raises(SystemExit, match="--video-root"):
        commands.main(base)
    report = commands.main([*base, "--video-root", str(tiny_synthetic_root / "videos")])
    assert seen == {"spec": ["configs/judge_demo.yaml"], "ckpt": "judge.ckpt"}
    n = len(records)
    assert report["vc_inspector"] == pytest.approx((5 + 1 * (n - 1)) / n)
    assert report["vc_inspector_clips"] == n
    assert json.loads(out.read_text())["vc_inspector_clips"] == n
    assert f"written to {out}" in capsys.readouterr().out
