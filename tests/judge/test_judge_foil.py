"""Hallucination accuracy on FOIL pairs: the metric by hand, the ActivityNet-FOIL reader, pairs from corruptions."""
import json
import math

import pytest

from judge.application.hallucination import pairwise_accuracy
from judge.application.scoring import score_foil_pairs
from judge.data.pairs import foil_pairs_from_corruptions, foil_rows, read_activitynet_foil
from judge.data.readers import JudgeDataError
from tests.judge.judge_fixtures import ScriptedJudge


def test_pairwise_accuracy_counts_ties_and_unreadable_pairs_as_half():
    result = pairwise_accuracy([5, 3, 2, 4, None], [4, 3, 3, 1, 2])
    assert result["accuracy"] == pytest.approx((2 + 0.5 * 2) / 5)  # wins 5>4, 4>1; tie 3=3; None: half
    assert result["accuracy_parsed"] == pytest.approx(2.5 / 4)
    assert (result["ties"], result["pairs"], result["unparsable_pairs"]) == (1, 5, 1)
    assert pairwise_accuracy([1.0], [float("nan")])["accuracy"] == 0.5
    assert math.isnan(pairwise_accuracy([], [])["accuracy"])
    with pytest.raises(ValueError, match="2 original scores but 1"):
        pairwise_accuracy([1, 2], [1])


def test_activitynet_foil_reader_aligns_sentences_and_takes_timestamps(tmp_path):
    right = {"results": {"v_a": [{"sentence": "A man plays a guitar."}, {"sentence": "He bows."}]}}
    foil = {"results": {"v_a": [{"sentence": "A man plays a violin."}, {"sentence": "He waves."}]}}
    (tmp_path / "final_right_video_sentences.json").write_text(json.dumps(right))
    (tmp_path / "final_foil_video_sentences.json").write_text(json.dumps(foil))
    (tmp_path / "anet_entities_test_1.json").write_text(json.dumps({"v_a": {"timestamps": [[0, 4.5], [4.5, 9]]}}))
    pairs = read_activitynet_foil(tmp_path, "{video_id}.webm")
    assert pairs == [
        {"key": "v_a_0", "video": "v_a.webm", "original": "A man plays a guitar.", "foil": "A man plays a violin.",
         "start_s": 0.0, "end_s": 4.5},
        {"key": "v_a_1", "video": "v_a.webm", "original": "He bows.", "foil": "He waves.",
         "start_s": 4.5, "end_s": 9.0}]
    assert [r["key"] for r in foil_rows(pairs)] == ["v_a_0#original", "v_a_0#foil", "v_a_1#original", "v_a_1#foil"]
    foil["results"]["v_a"].pop()
    (tmp_path / "final_foil_video_sentences.json").write_text(json.dumps(foil))
    with pytest.raises(JudgeDataError, match="video 'v_a': the FOIL file has 1 sentences, the right one 2"):
        read_activitynet_foil(tmp_path)


def test_corruption_rows_with_one_substitution_become_foil_pairs():
    rows = [
        {"key": "a#0", "video": "a.mp4", "caption": "a red cross.", "original_caption": "a red circle.",
         "substitutions": [{"kind": "object", "old": "circle", "new": "cross"}], "start_frame": 0, "end_frame": 9},
        {"key": "a#1", "video": "a.mp4", "caption": "a blue cross.", "original_caption": "a red circle.",
         "substitutions": [{"kind": "object", "old": "red circle", "new": "blue cross"}, {"kind": "x", "old": "a",
                                                                                            "new": "b"}]},
        {"key": "a#2", "video": "a.mp4", "caption": "a red circle.", "original_caption": "a red circle.",
         "substitutions": []},
    ]
    assert foil_pairs_from_corruptions(rows) == [{"key": "a#0", "video": "a.mp4", "original": "a red circle.",
                                                  "foil": "a red cross.", "start_frame": 0, "end_frame": 9}]


def test_foil_scoring_gives_the_known_accuracy(tiny_synthetic_root, tmp_path):
    records = json.loads((tiny_synthetic_root / "annotations" / "test.json").read_text())["records"]
    video = records[0]["video_fname"]
    pairs = [{"key": str(k), "video": video, "original": f"true {k}", "foil": f"foil {k}"} for k in range(4)]
    scores = {"true 0": 5, "foil 0": 2, "true 1": 3, "foil 1": 4, "true 2": 4, "foil 2": 4, "true 3": 5}
    judge = ScriptedJudge(lambda c: f"{scores[c]}\n\nx" if c in scores else "unreadable")
    _, summary = score_foil_pairs(judge, pairs, tmp_path / "foil.jsonl", video_root=str(tiny_synthetic_root / "videos"),
                                  num_frames=4, batch_size=3, progress=False)
    # pair 0 right, pair 1 wrong, pair 2 a tie, pair 3's FOIL unreadable: (1 + 0.5 + 0.5) / 4
    assert summary["foil"]["accuracy"] == pytest.approx(0.5)
    assert summary["foil"]["accuracy_parsed"] == pytest.approx(1.5 / 3)
    assert summary["unparsable"] == 1
