"""Each benchmark reader on a small fixture written in the benchmark's public release format."""
import json
import pickle

import numpy as np
import pytest

from agreement.benchmarks.detailcaps import read_detailcaps
from agreement.benchmarks.fg_eval import read_fg_eval
from agreement.benchmarks.foil import read_activitynet_foil_benchmark, read_foil_coco, read_synthetic_foil
from agreement.benchmarks.human_rated import read_flickr8k, read_vatex_eval, read_youcook2_eval
from agreement.benchmarks.items import BenchmarkFormatError


def _vatex_folder(tmp_path):
    folder = tmp_path / "VATEX-EVAL"
    folder.mkdir()
    dump = {"candidates_list": np.array(["a man cooks", "a dog runs", "a man eats"], dtype=object),
            "video_ids": np.array(["vidA", "vidB", "vidA"], dtype=object),
            "human_scores": np.array([[5, 1, 3], [4, 2, 3], [5, 1, 2]], dtype=float),  # annotators x captions
            "gts_list": np.array([["a man is cooking", "someone cooks"], ["a dog running", "a puppy runs"],
                                  ["a man is cooking", "someone cooks"]], dtype=object)}
    for name, value in dump.items():
        with open(folder / f"{name}.pkl", "wb") as f:
            pickle.dump(value, f)
    return folder


def test_vatex_eval_folder(tmp_path):
    bench = read_vatex_eval(_vatex_folder(tmp_path), n_refs=1)
    assert [i.caption for i in bench.items] == ["a man cooks", "a dog runs", "a man eats"]
    assert bench.items[1].visual.video == "vidB.mp4" and bench.items[1].references == ["a dog running"]
    np.testing.assert_array_equal(bench.ratings[:, 0], [5, 1, 3])  # annotator 0 of each caption
    np.testing.assert_array_equal(bench.ratings[2], [3, 3, 2])
    assert bench.protocol == "per_annotator" and bench.statistics == ("kendall_tau_b", "spearman_rho")
    assert read_vatex_eval(tmp_path / "VATEX-EVAL", n_refs=None).items[0].references == ["a man is cooking",
                                                                                        "someone cooks"]
    with pytest.raises(BenchmarkFormatError, match="n_refs=9"):
        read_vatex_eval(tmp_path / "VATEX-EVAL", n_refs=9)


def test_youcook2_eval_json(tmp_path):
    path = tmp_path / "youcook2_eval.json"
    path.write_text(json.dumps([{"video_id": "yc1", "caption": "add salt", "human_scores": [4, 5, 4],
                                 "start_s": 3.0, "end_s": 9.5},
                                {"video_id": "yc2", "caption": "cut onion", "human_scores": [1, 2, 1]}]))
    bench = read_youcook2_eval(path)
    assert bench.name == "YouCook2-Eval" and bench.items[0].visual.start_s == 3.0
    np.testing.assert_allclose(bench.mean_rating(), [13 / 3, 4 / 3])
    path.write_text(json.dumps([{"video_id": "yc1", "caption": "add salt"}]))
    with pytest.raises(BenchmarkFormatError, match="human_scores"):
        read_youcook2_eval(path)


def _flickr(tmp_path, name, ratings):
    data = {"1000268201": {"image_path": "Flicker8k_Dataset/1000268201.jpg",
                           "ground_truth": ["a child  in pink", "a girl climbs"],
                           "human_judgement": [{"caption": "a girl  going into a house", "rating": r,
                                                "image_path": "Flicker8k_Dataset/1000268201.jpg"} for r in ratings]}}
    path = tmp_path / name
    path.write_text(json.dumps(data).replace("NaN", "NaN"))
    return path


def test_flickr8k_expert_and_crowdflower(tmp_path):
    expert = read_flickr8k(_flickr(tmp_path, "flickr8k.json", [4.0, 3.0, float("nan")]))
    assert expert.name == "Flickr8K-Expert" and len(expert.items) == 2  # the NaN judgement is dropped
    assert expert.items[0].caption == "a girl going into a house"
    assert expert.items[0].references == ["a child in pink", "a girl climbs"]
    assert expert.statistics == ("kendall_tau_c", "kendall_tau_b")
    cf = read_flickr8k(_flickr(tmp_path, "crowdflower_flickr8k.json", [0.6]))
    assert cf.name == "Flickr8K-CF" and cf.statistics == ("kendall_tau_b",)
    assert cf.items[0].visual.image == "Flicker8k_Dataset/1000268201.jpg"
    renamed = read_flickr8k(_flickr(tmp_path, "cf.json", [0.6]), crowdflower=True)
    assert renamed.name == "Flickr8K-CF" and renamed.statistics == ("kendall_tau_b",)


def test_foil_coco_pairs_and_references(tmp_path):
    foil = {"images": [{"id": 42, "file_name": "COCO_val2014_000000000042.jpg"}],
            "annotations": [{"id": 7, "image_id": 42, "caption": "A dog on a sofa.", "foil": False},
                            {"id": 7, "image_id": 42, "caption": "A cat on a sofa.", "foil": True,
                             "target_word": "dog", "foil_word": "cat"}]}
    coco = {"annotations": [{"image_id": 42, "caption": c} for c in
                            ["A dog on a sofa.", "a dog lying down", "a brown dog", "a pet", "a sofa", "a couch"]]}
    (tmp_path / "foil.json").write_text(json.dumps(foil))
    (tmp_path / "coco.json").write_text(json.dumps(coco))
    bench = read_foil_coco(tmp_path / "foil.json", tmp_path / "coco.json", n_refs=4)
    assert bench.is_foil and bench.foil_pairs == [(0, 1)]
    assert [i.caption for i in bench.items] == ["A dog on a sofa.", "A cat on a sofa."]
    assert bench.items[0].references == ["a dog lying down", "a brown dog", "a pet", "a sofa"]
    assert bench.items[1].visual.image == "COCO_val2014_000000000042.jpg"
    assert read_foil_coco(tmp_path / "foil.json").items[0].references == []


def test_activitynet_foil_release(tmp_path):
    (tmp_path / "final_right_video_sentences.json").write_text(json.dumps(
        {"results": {"v_abc": [{"sentence": "A man plays a guitar."}]}}))
    (tmp_path / "final_foil_video_sentences.json").write_text(json.dumps(
        {"results": {"v_abc": [{"sentence": "A man plays a piano."}]}}))
    (tmp_path / "anet_entities_test_1.json").write_text(json.dumps({"v_abc": {"timestamps": [[1.0, 5.5]]}}))
    bench = read_activitynet_foil_benchmark(tmp_path)
    assert bench.foil_pairs == [(0, 1)] and bench.items[1].caption == "A man plays a piano."
    assert bench.items[0].visual.video == "v_abc.mp4" and bench.items[0].visual.end_s == 5.5


def _corruption_rows():
    base = {"video": "clip.mp4", "fps": 10.0, "start_frame": 0, "end_frame": 29, "start_s": None, "end_s": None,
            "original_caption": "a red circle moves up.", "source_key": "clip", "explanation": "x",
            "num_objects": 1, "num_actions": 1, "backend": "rule"}
    return [{**base, "key": "clip#0", "caption": "a red circle moves up.", "score": 5, "substitutions": []},
            {**base, "key": "clip#1", "caption": "a red square moves up.", "score": 3,
             "substitutions": [{"kind": "object", "old": "circle", "new": "square"}]},
            {**base, "key": "clip#2", "caption": "a red square moves down.", "score": 1,
             "substitutions": [{"kind": "object", "old": "circle", "new": "square"},
                               {"kind": "action", "old": "moves up", "new": "moves down"}]}]


def test_fg_eval_and_synthetic_foil_from_generator_rows(tmp_path):
    path = tmp_path / "corruptions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _corruption_rows()))
    fg = read_fg_eval(path)
    np.testing.assert_array_equal(fg.mean_rating(), [5, 3, 1])
    assert fg.items[2].references == ["a red circle moves up."] and fg.items[0].visual.end_frame == 29
    foil = read_synthetic_foil(path)
    assert foil.foil_pairs == [(0, 1)]
    assert [i.caption for i in foil.items] == ["a red circle moves up.", "a red square moves up."]


def test_fg_eval_refuses_a_key_twice(tmp_path):
    rows = _corruption_rows()
    rows.insert(3, {**rows[1], "caption": "a red square moves left.", "score": 2})
    path = tmp_path / "corruptions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(BenchmarkFormatError, match=r"row 4: key 'clip#1' is also row 2"):
        read_fg_eval(path)


def _detailcaps_rows():
    return [{"image": "coco/1.jpg", "source": "COCO", "GT_Caption_GPT4O": "A kitchen  with a red kettle.",
             "GT_Caption_GPT4V": "A red kettle on a stove.", "GT_Caption_Gemini15Pro": "",
             "CogVLM": "A kettle.", "ShareCaptioner": "A red kettle on a stove.", "LLaVA_v15": "A blue car.",
             "GPT4_Eval": json.dumps({"CogVLM": 3, "ShareCaptioner": 5, "LLaVA_v15": 1})},
            {"image": "sam/2.jpg", "source": "SAM", "GT_Caption_GPT4O": "A dog.", "CogVLM": "x",
             "ShareCaptioner": "y", "LLaVA_v15": "z", "GPT4_Eval": None}]


def test_detailcaps_jsonl(tmp_path):
    path = tmp_path / "DetailCaps-100.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _detailcaps_rows()))
    bench = read_detailcaps(path, name="DetailCaps-100")
    assert len(bench.items) == 3  # the unscored row is skipped
    assert bench.items[0].references == ["A kitchen with a red kettle.", "A red kettle on a stove."]
    np.testing.assert_array_equal(bench.mean_rating(), [3, 5, 1])
    assert {i.group for i in bench.items} == {"coco/1.jpg"}
    assert bench.statistics == ("pearson_r", "one_minus_r2", "kendall_tau_b", "per_sample_tau")


def test_detailcaps_parquet_with_image_bytes(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import io

    import pyarrow.parquet as pq
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 6), (200, 10, 10)).save(buf, format="PNG")
    rows = [{**_detailcaps_rows()[0], "binary": buf.getvalue()}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "DetailCaps-4870.parquet")
    bench = read_detailcaps(tmp_path / "DetailCaps-4870.parquet", name="DetailCaps-4870")
    from agreement.media import FrameLoader

    frames = FrameLoader(tmp_path).frames(bench.items[0].visual)
    assert frames.shape == (1, 6, 8, 3) and frames[0, 0, 0].tolist() == [200, 10, 10]
