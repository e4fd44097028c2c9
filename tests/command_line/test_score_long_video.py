"""grove score-long-video: the per-clip metrics table of a run next to its identity table."""
import json

import pytest

from command_line.score_long_video import TRUE_BOXES_NOTE, main
from longvideo.clip_records import records_from_truth
from tests.fixtures.long_clips import hand_truth, perfect_predictions, run_files


def test_a_run_made_of_the_truth_prints_perfect_clip_metrics_next_to_the_identity_table(tmp_path, capsys):
    truth = hand_truth()
    predictions = perfect_predictions(records_from_truth(truth, clip_seconds=2.0))
    run_files(tmp_path, truth, predictions)
    (tmp_path / "hand.json").write_text(json.dumps(truth))
    out = main(["--truth", str(tmp_path / "hand.json"), "--timeline", str(tmp_path / "timeline.json"),
                "--clip-seconds", "2", "--text-encoder", "exact", "--caption-metrics", "BLEU-4", "--no-capture"])
    printed = capsys.readouterr().out
    (name, report), = out["clips"]
    assert report["num_clips"] == 2 and report["missing_predictions"] == []
    for metric in ("AP50", "mIoU", "recall", "BLEU-4"):
        assert report["metrics"][metric] == pytest.approx(1.0), metric
    assert [row[0] for row in out["identity"]][0] == "model clips, no linking"
    assert "| linking | HOTA |" in printed
    assert "| clips | n | AP50 | mIoU | recall | AP50_frame | mIoU_frame | recall_frame | BLEU-4 |" in printed
    assert "| model clips | 2 | 1.000 | 1.000 | 1.000 | 1.000 | 1.000 | 1.000 | 1.000 |" in printed
    assert TRUE_BOXES_NOTE not in printed

    # a clip the run did not predict is scored as empty and named
    del predictions["hand_1"]
    run_files(tmp_path, truth, predictions)
    out = main(["--truth", str(tmp_path / "hand.json"), "--timeline", str(tmp_path / "timeline.json"),
                "--clip-seconds", "2", "--text-encoder", "exact", "--caption-metrics", "", "--no-capture",
                "--linking-alone"])
    printed = capsys.readouterr().out
    assert out["clips"][0][1]["metrics"]["AP50"] == pytest.approx(0.5)
    assert "clips not predicted, scored as empty: 1: hand_1" in printed
    assert TRUE_BOXES_NOTE in printed


def test_a_run_cut_with_another_clip_length_is_refused(tmp_path):
    truth = hand_truth()
    run_files(tmp_path, truth, perfect_predictions(records_from_truth(truth, clip_seconds=2.0)))
    (tmp_path / "hand.json").write_text(json.dumps(truth))
    with pytest.raises(SystemExit, match=r"timeline.json: segment 'hand_0' covers frames 0\.\.9 but the ground "
                                         r"truth's clip covers 0\.\.11"):
        main(["--truth", str(tmp_path / "hand.json"), "--timeline", str(tmp_path / "timeline.json"),
              "--text-encoder", "exact", "--caption-metrics", "", "--no-capture"])


@pytest.mark.parametrize("field, value, named", [
    ("num_frames", None, r"frames in the truth, \d+ in the timeline"),
    ("width", 999, r"frame size 999x\d+ in the truth, \d+x\d+ in the timeline"),
    ("fps", 7.5, r"frame rate 7.5 fps in the truth, [\d.]+ fps in the timeline"),
])
def test_the_truth_of_another_video_with_the_same_name_is_refused_naming_both(tmp_path, field, value, named):
    truth = hand_truth()
    run_files(tmp_path, truth, perfect_predictions(records_from_truth(truth, clip_seconds=2.0)))
    other = dict(truth)
    other[field] = truth["num_frames"] * 2 if value is None else value
    (tmp_path / "other.json").write_text(json.dumps(other))
    for with_predictions in (True, False):  # with or without the run's clips beside the timeline
        if not with_predictions:
            (tmp_path / "predictions_predict.json").unlink()
        with pytest.raises(SystemExit, match=rf"--truth .*other.json describes another video than --timeline "
                                             rf".*timeline.json's 'hand'.*{named}"):
            main(["--truth", str(tmp_path / "other.json"), "--timeline", str(tmp_path / "timeline.json"),
                  "--clip-seconds", "2", "--text-encoder", "exact", "--caption-metrics", "", "--no-capture"])
