"""The VC-Inspector paper's data ablations as options: corrupt objects only / actions only / both
(Table 6) and targets without explanations (Table 7); YouCook2 captions as generator sources."""
import json

import numpy as np
import pytest

from judge.data.corruption.data_types import CaptionSource
from judge.data.corruption.generator import generate_corruptions, resolve_kinds
from judge.data.corruption.rule_backend import RuleBackend
from judge.data.readers import JudgeDataError, read_youcook2_captions
from judge.data.targets import likert_score
from judge.model.prompt_format import format_judge_answer, parse_judge_answer

CAPTIONS = ["a red circle moves up, then a blue square enters from the left.",
            "a green triangle bounces up and down, then a red square leaves to the right.",
            "a blue circle stays still, then a green square moves down.",
            "a red triangle enters from the right, then a blue circle hides behind the wall."]


def _sources():
    return [CaptionSource(key=f"c{i}", video=f"c{i}.mp4", caption=c, fps=25.0, start_frame=0, end_frame=99)
            for i, c in enumerate(CAPTIONS)]


@pytest.fixture(scope="module")
def rows_by_kind():
    backend = RuleBackend(in_domain="require", closed_domain=True)
    return {kind: generate_corruptions(_sources(), backend, per_caption=12, seed=0, corrupt=kind)[0]
            for kind in ("objects", "actions", "both")}


@pytest.mark.parametrize("kind,other", [("objects", "action"), ("actions", "object")])
def test_one_kind_only_changes_that_kind_and_scores_over_it(rows_by_kind, kind, other):
    rows = rows_by_kind[kind]
    assert rows
    assert all(s["kind"] == kind[:-1] for r in rows for s in r["substitutions"])
    assert all(r[f"num_{other}s"] == 0 and r[f"num_{kind}"] > 0 for r in rows)
    for r in rows:  # the score counts only the elements of the chosen kind
        assert r["score"] == likert_score(len(r["substitutions"]), r[f"num_{kind}"])
    assert {r["score"] for r in rows} >= {1, 5}


def test_both_changes_objects_and_actions(rows_by_kind):
    kinds = {s["kind"] for r in rows_by_kind["both"] for s in r["substitutions"]}
    assert kinds == {"object", "action"}
    assert all(r["num_objects"] > 0 and r["num_actions"] > 0 for r in rows_by_kind["both"])


def test_corrupt_option_values():
    assert resolve_kinds("both") == ("object", "action") and resolve_kinds(["action"]) == ("action",)
    with pytest.raises(ValueError, match="corrupt must be one of"):
        resolve_kinds("verbs")
    with pytest.raises(ValueError, match="element kinds"):
        resolve_kinds(["object", "colour"])


def test_answer_without_explanation_is_the_score_line_alone():
    assert format_judge_answer(4, None) == "4"
    parsed = parse_judge_answer(format_judge_answer(4, None))
    assert parsed.score == 4 and parsed.explanation == ""
    assert format_judge_answer(2, "Wrong object.") == "2\n\nWrong object."


@pytest.mark.parametrize("explanations", [True, False])
def test_dataset_targets_follow_the_explanations_switch(explanations):
    from judge.data.dataset import JudgeDataset

    class Prompter:
        def encode(self, frames, caption, answer=None, sampled_fps=None, error_spans=None):
            return {"answer": answer}

    row = {"key": "k", "video": "v.mp4", "caption": "a red square moves up.", "score": 3,
           "explanation": "The caption does not accurately capture the video content.", "substitutions": []}
    dataset = JudgeDataset([row], ".", Prompter(), explanations=explanations)
    dataset.clip_frames = lambda r: (np.zeros((2, 8, 8, 3), np.uint8), 4.0)
    expected = f"3\n\n{row['explanation']}" if explanations else "3"
    assert dataset[0]["answer"] == expected


def test_datamodule_passes_the_corrupt_option_to_the_generator(tmp_path, monkeypatch):
    import judge.data.datamodule as dm

    seen = {}
    monkeypatch.setattr(dm, "read_records", lambda path: [])
    monkeypatch.setattr(dm, "sources_from_records", lambda records: ["source"])
    monkeypatch.setattr(dm, "build_judge_split", lambda sources, out, backend, **run: seen.update(run))
    module = dm.JudgeDataModule(train_annotations=str(tmp_path / "train.jsonl"),
                                generate_from={"train": "records.json"},
                                generator={"backend": "rule", "per_caption": 3, "corrupt": "objects"},
                                explanations=False)
    module.prepare_data()
    assert seen == {"per_caption": 3, "corrupt": "objects"} and module.hparams.explanations is False


def test_youcook2_annotations_as_generator_sources(tmp_path):
    path = tmp_path / "youcookii_annotations_trainval.json"
    path.write_text(json.dumps({"database": {
        "GLd3aX16zBg": {"subset": "validation", "duration": 241.6, "recipe_type": "113",
                        "annotations": [{"id": 0, "segment": [90, 102], "sentence": "spread margarine on bread"}]},
        "xHr8X2Wpmno": {"subset": "training", "duration": 100.0,
                        "annotations": [{"id": 0, "segment": [1, 5], "sentence": "cut the onion"}]}}}))
    sources = read_youcook2_captions(path)
    assert len(sources) == 1 and sources[0].key == "GLd3aX16zBg_0" and sources[0].video == "GLd3aX16zBg.mp4"
    assert (sources[0].start_s, sources[0].end_s) == (90.0, 102.0)
    assert len(read_youcook2_captions(path, subset=None)) == 2
    path.write_text(json.dumps({"database": {"v": {"subset": "validation", "annotations": [{"segment": [5, 1],
                                                                                            "sentence": "x"}]}}}))
    with pytest.raises(JudgeDataError, match="'segment'"):
        read_youcook2_captions(path)
