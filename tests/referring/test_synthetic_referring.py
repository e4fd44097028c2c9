"""The synthetic referring set: its queries, and its scores for the true answers, the query-blind floor and
a checkpoint (through ``grove referring``)."""
import core  # noqa: F401

import json

import numpy as np
import pytest

from command_line.grove import main as grove
from formats.records import read_records
from referring.synthetic_scoring import (
    first_phrase_tubes,
    grounded_object,
    oracle_tubes,
    score_referring_set,
    tube_viou,
)
from referring.synthetic_set import build_referring_set, read_referring_set


@pytest.fixture(scope="module")
def records(tiny_synthetic_root):
    return {r.key: r for r in read_records(tiny_synthetic_root / "annotations" / "test.json")}


def test_each_object_is_asked_by_its_phrase_and_distractors_name_what_the_clip_lacks(records):
    queries = build_referring_set(list(records.values()), distractors=3, seed=0)
    for record in records.values():
        mine = [q for q in queries if q.clip == record.key]
        assert [q.query for q in mine if q.target] == list(dict.fromkeys(record.phrases))
        distractors = [q.query for q in mine if q.target is None]
        assert len(distractors) == 3
        for text in distractors:
            colour, shape = text.split()[-2:]
            assert all(colour not in p and shape not in p for p in record.phrases)


def test_tube_scores_follow_their_definitions():
    a, b = np.array([0, 0, 10, 10.0]), np.array([0, 0, 10, 20.0])
    assert tube_viou({0: a, 5: a}, {0: a, 5: b, 10: a}) == pytest.approx((1 + 0.5) / 3)
    assert tube_viou({}, {}) == 1.0 and tube_viou({0: a}, {5: a}) == 0.0
    tubes = {"x": {0: a, 5: a}, "y": {0: b}}
    assert grounded_object({0: b}, tubes) == "y"  # IoU 1 with y beats 0.5 with x
    assert grounded_object({0: a, 5: a}, tubes) == "x"
    assert grounded_object({5: np.array([50, 50, 60, 60.0])}, tubes) is None


def test_the_oracle_scores_one_and_the_query_blind_floor_less(records):
    queries = build_referring_set(list(records.values()), distractors=2, seed=0)
    oracle = score_referring_set(records, queries, oracle_tubes(records, queries))
    assert {k: oracle[k] for k in ("accuracy", "mIoU", "rejection", "frame_rejection")} == {
        "accuracy": 1.0, "mIoU": 1.0, "rejection": 1.0, "frame_rejection": 1.0}
    floor = score_referring_set(records, queries, first_phrase_tubes(records, queries))
    assert floor["rejection"] == 0.0 and floor["frame_rejection"] < 1.0
    first_only = np.mean([q.target == records[q.clip].phrases[0] for q in queries if q.target])
    assert floor["accuracy"] == pytest.approx(first_only) and floor["accuracy"] < 1.0


def test_grove_referring_grounds_and_scores_a_set(records, tiny_synthetic_root, tmp_path, capsys):
    from tests.webdemo.tiny_model import DEMO_CONFIG, TINY_MODEL_ARGS, fit_tiny

    checkpoint = fit_tiny(tiny_synthetic_root, tmp_path / "fit")
    annotations = tiny_synthetic_root / "annotations" / "test.json"
    grove(["referring", "synthetic-set", "--annotations", str(annotations), "--out", str(tmp_path / "set.json")])
    queries, _ = read_referring_set(tmp_path / "set.json")
    grove(["referring", "predict", "--set", str(tmp_path / "set.json"), "--video-root",
           str(tiny_synthetic_root / "videos"), "--config", str(DEMO_CONFIG), "--ckpt-path", str(checkpoint),
           "--objectness-threshold", "0", "--out", str(tmp_path / "pred.json"), *TINY_MODEL_ARGS])
    entries = json.loads((tmp_path / "pred.json").read_text())
    assert [e["query"] for e in entries.values()] == [q.query for q in queries]
    grove(["referring", "score", "--set", str(tmp_path / "set.json"), "--pred", str(tmp_path / "pred.json"),
           "--out", str(tmp_path / "scores.json")])
    scores = json.loads((tmp_path / "scores.json").read_text())
    # threshold 0 keeps every box: no distractor is rejected
    assert scores["rejection"] == 0.0 and scores["frame_rejection"] == 0.0
    assert 0.0 <= scores["mIoU"] <= 1.0 and scores["object_queries"] == sum(q.target is not None for q in queries)
