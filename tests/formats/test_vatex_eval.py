"""The one VATEX-Eval reader: the release's pickles and the JSON list give the same entries; errors name the place."""
import json
import pickle

import numpy as np
import pytest

from agreement.benchmarks.human_rated import read_vatex_eval as benchmark_of
from formats.vatex_eval import RatedCaption, VatexEvalFormatError, read_rated_captions
from judge.data.readers import read_vatex_eval as judge_rows_of


def _folder(tmp_path, with_references=True):
    folder = tmp_path / "VATEX-EVAL"
    folder.mkdir(parents=True)
    dump = {"candidates_list": np.array(["a man cooks", "a dog runs"], dtype=object),
            "video_ids": ["vidA", "vidB"],
            "human_scores": np.array([4, 1, 5, 2, 3, 2], dtype=float)}  # flat, annotator-major: 3 x 2
    if with_references:
        dump["gts_list"] = [["a man is cooking"], np.array(["a dog running", "a puppy runs"], dtype=object)]
    for name, value in dump.items():
        with open(folder / f"{name}.pkl", "wb") as f:
            pickle.dump(value, f)
    return folder


def test_folder_and_json_give_the_same_entries(tmp_path):
    expected = [RatedCaption("vidA", "a man cooks", (4.0, 5.0, 3.0), ("a man is cooking",)),
                RatedCaption("vidB", "a dog runs", (1.0, 2.0, 2.0), ("a dog running", "a puppy runs"))]
    assert read_rated_captions(_folder(tmp_path)) == expected
    path = tmp_path / "rated.json"
    path.write_text(json.dumps([{"video_id": e.video_id, "caption": e.caption, "human_scores": list(e.human_scores),
                                 "references": list(e.references)} for e in expected]))
    assert read_rated_captions(path) == expected


def test_the_judge_and_the_agreement_study_read_one_file_alike(tmp_path):
    folder = _folder(tmp_path)
    rows, bench = judge_rows_of(folder), benchmark_of(folder, n_refs=None)
    assert [r["key"] for r in rows] == [i.key for i in bench.items] == ["vidA#0", "vidB#1"]
    assert [r["caption"] for r in rows] == [i.caption for i in bench.items]
    np.testing.assert_array_equal(np.array([r["human_scores"] for r in rows]), bench.ratings)
    assert bench.items[1].references == ["a dog running", "a puppy runs"]
    without = _folder(tmp_path / "bare", with_references=False)
    assert read_rated_captions(without)[0].references is None  # references are optional for the judge ...
    with pytest.raises(FileNotFoundError, match="gts_list.pkl"):  # ... and needed when a benchmark uses them
        read_rated_captions(without, need_references=True)


@pytest.mark.parametrize("entries, message", [
    ([{"video_id": "v", "caption": "c"}], r"entry 0: missing field 'human_scores'"),
    ([{"video_id": "v", "caption": "c", "human_scores": [3]}, {"video_id": "w", "caption": 7, "human_scores": [1]}],
     r"entry 1: field 'caption' must be a string, got int"),
    ([{"video_id": "v", "caption": "c", "human_scores": []}], r"entry 0: field 'human_scores' must be a non-empty"),
    ([{"video_id": "v", "caption": "c", "human_scores": [2], "start_s": "soon"}], r"entry 0: field 'start_s'"),
    ([], r"expected a non-empty list"),
])
def test_bad_json_is_named_by_file_entry_and_field(tmp_path, entries, message):
    path = tmp_path / "rated.json"
    path.write_text(json.dumps(entries))
    with pytest.raises(VatexEvalFormatError, match=r"rated.json(, |: )" + message):
        read_rated_captions(path)


def test_counts_that_do_not_line_up_are_an_error(tmp_path):
    folder = _folder(tmp_path)
    with open(folder / "human_scores.pkl", "wb") as f:
        pickle.dump(np.arange(5, dtype=float), f)
    with pytest.raises(VatexEvalFormatError, match="2 candidates, 2 video ids and 5 human scores do not line up"):
        read_rated_captions(folder)
