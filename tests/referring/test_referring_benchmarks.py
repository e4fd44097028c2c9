"""MeViS and Ref-YouTube-VOS from tiny folders in their distributed layouts: every expression grounded into the
submission layout, an oracle scoring J&F 1.0 through the whole path, and GROVE's own answers written in full."""
import core  # noqa: F401

import json

import numpy as np
import pytest
import torch
from PIL import Image

from formats.mask_rle import encode_masks
from metrics.commands.mevis import main as mevis_main
from models.grove.query_grounding import parse_query, query_key
from referring.benchmarks import model_check, model_grounder, predict_benchmark, read_meta_expressions
from referring.ref_youtube_vos import evaluate_ref_youtube_vos

HEIGHT, WIDTH = 40, 56
# video -> frame names, and per object its box (x1, y1, x2, y2) on each frame (None: absent)
VIDEOS = {
    "v1": (["00000", "00001", "00002", "00003"],
           {"1": [(4, 6, 20, 18), (6, 6, 22, 18), None, (10, 8, 26, 20)],
            "2": [(30, 20, 50, 36), (30, 20, 50, 36), (28, 18, 48, 34), (26, 18, 46, 34)]}),
    "v2": (["00000", "00001", "00002"], {"1": [(10, 10, 30, 30), (12, 10, 32, 30), (14, 10, 34, 30)]}),
}
# video -> exp_id -> (text, object ids)
EXPRESSIONS = {"v1": {"0": ("the red square moving right", ["1"]), "1": ("the blue circle", ["2"]),
                      "2": ("both shapes", ["1", "2"])},
               "v2": {"0": ("the green square", ["1"])}}


def _mask(box):
    mask = np.zeros((HEIGHT, WIDTH), dtype=bool)
    if box is not None:
        x1, y1, x2, y2 = box
        mask[y1:y2, x1:x2] = True
    return mask


def _truth(video, objects):
    names, boxes = VIDEOS[video]
    return np.stack([np.any([_mask(boxes[o][i]) for o in objects], axis=0) for i in range(len(names))])


def _write_frames(root, video, names):
    folder = root / video
    folder.mkdir(parents=True)
    rng = np.random.default_rng(len(video))
    for name in names:
        Image.fromarray(rng.integers(0, 255, (HEIGHT, WIDTH, 3), dtype=np.uint8)).save(folder / f"{name}.jpg")


@pytest.fixture
def mevis_split(tmp_path):
    split = tmp_path / "valid_u"
    meta, mask_dict, anno = {"videos": {}}, {}, 0
    for video, (names, boxes) in VIDEOS.items():
        _write_frames(split / "JPEGImages", video, names)
        ids = {}
        for obj, per_frame in boxes.items():
            ids[obj] = str(anno)
            mask_dict[str(anno)] = [encode_masks(_mask(b))[0] if b is not None else None for b in per_frame]
            anno += 1
        meta["videos"][video] = {"frames": names, "expressions": {
            e: {"exp": text, "obj_id": [int(o) for o in objs], "anno_id": [int(ids[o]) for o in objs]}
            for e, (text, objs) in EXPRESSIONS[video].items()}}
    (split / "meta_expressions.json").write_text(json.dumps(meta))
    (split / "mask_dict.json").write_text(json.dumps(mask_dict))
    return split


@pytest.fixture
def ref_youtube_vos(tmp_path):
    """Ref-YouTube-VOS's layout: meta_expressions/train/meta_expressions.json, train/JPEGImages and
    train/Annotations (palette PNGs of object ids); frames every fifth source frame; one object per expression."""
    root = tmp_path / "ref-youtube-vos"
    meta = {"videos": {}}
    for video, (names, boxes) in VIDEOS.items():
        names = [f"{5 * i:05d}" for i in range(len(names))]
        _write_frames(root / "train" / "JPEGImages", video, names)
        (root / "train" / "Annotations" / video).mkdir(parents=True)
        for i, name in enumerate(names):
            label = np.zeros((HEIGHT, WIDTH), dtype=np.uint8)
            for obj, per_frame in boxes.items():
                label[_mask(per_frame[i])] = int(obj)
            image = Image.fromarray(label, mode="P")
            image.putpalette([0, 0, 0, 236, 95, 103, 249, 145, 87] + [0] * (256 * 3 - 9))
            image.save(root / "train" / "Annotations" / video / f"{name}.png")
        meta["videos"][video] = {"frames": names, "expressions": {
            e: {"exp": text, "obj_id": objs[0]} for e, (text, objs) in EXPRESSIONS[video].items() if len(objs) == 1}}
    (root / "meta_expressions" / "train").mkdir(parents=True)
    (root / "meta_expressions" / "train" / "meta_expressions.json").write_text(json.dumps(meta))
    return root


def oracle_grounder(with_masks: bool):
    """Answers each expression with its true objects (tight boxes; their masks when ``with_masks``)."""
    def ground(video, frames, record, queries):
        out = {}
        for i, query in enumerate(queries):
            exp = next(e for e, (t, _) in EXPRESSIONS[video.video].items() if t == query.text)
            truth = _truth(video.video, EXPRESSIONS[video.video][exp][1])
            entry_frames = []
            for f, mask in enumerate(truth):
                if mask.any():
                    ys, xs = np.nonzero(mask)
                    item = {"frame": f, "boxes": [[int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1]],
                            "labels": [query.referent], "scores": [1.0]}
                    if with_masks:
                        item["masks"] = encode_masks(mask)
                    entry_frames.append(item)
            out[query_key(record.key, i)] = {"referent": query.referent, "phrases": [query.referent],
                                             "frames": entry_frames}
        return out

    return ground


@pytest.mark.parametrize("with_masks", [True, False])
def test_an_oracle_scores_mevis_j_and_f_one_through_the_whole_path(mevis_split, tmp_path, with_masks):
    out = tmp_path / "submission"
    counts = predict_benchmark(oracle_grounder(with_masks), parse_query, mevis_split / "meta_expressions.json",
                               mevis_split / "JPEGImages", out, "mevis")
    assert counts == {"videos": 2, "expressions": 4, "refused": 0}
    assert sorted(p.relative_to(out).as_posix() for p in out.glob("v1/2/*.png")) == [
        f"v1/2/0000{i}.png" for i in range(4)]
    # "both shapes" names two objects: the oracle boxes their union on each frame, which fills more than the
    # two masks; with masks it is exact
    for pred in (out, out / "predictions.json"):
        metrics = mevis_main(["--split", str(mevis_split), "--pred", str(pred)])
        if with_masks:
            assert metrics["J&F"] == pytest.approx(1.0) and metrics["num_missing"] == 0
        else:
            assert metrics["J&F"] < 1.0
    if not with_masks:  # every expression naming one box-shaped object is exact
        report = mevis_main(["--split", str(mevis_split), "--pred", str(out), "--out", str(tmp_path / "r.json")])
        per = json.loads((tmp_path / "r.json").read_text())["per_expression"]
        assert {k: v["J&F"] for k, v in per.items() if k != "v1_2"} == {"v1_0": 1.0, "v1_1": 1.0, "v2_0": 1.0}
        assert report["num_expressions"] == 4


def test_an_oracle_scores_ref_youtube_vos_j_and_f_one(ref_youtube_vos, tmp_path):
    meta = ref_youtube_vos / "meta_expressions" / "train" / "meta_expressions.json"
    out = tmp_path / "submission"
    videos = read_meta_expressions(meta)
    assert [v.frames for v in videos] == [("00000", "00005", "00010", "00015"), ("00000", "00005", "00010")]
    predict_benchmark(oracle_grounder(False), parse_query, meta, ref_youtube_vos / "train" / "JPEGImages", out,
                      "ref-youtube-vos")
    assert (out / "Annotations" / "v1" / "1" / "00015.png").is_file()
    report = evaluate_ref_youtube_vos(meta, ref_youtube_vos / "train" / "Annotations", out)
    assert report["metrics"]["J&F"] == pytest.approx(1.0) and report["metrics"]["num_expressions"] == 3
    (out / "Annotations" / "v2" / "0" / "00005.png").unlink()
    with pytest.raises(FileNotFoundError, match="00005.png"):
        evaluate_ref_youtube_vos(meta, ref_youtube_vos / "train" / "Annotations", out)


def test_grove_answers_every_expression_and_refuses_what_it_cannot_ground(mevis_split, tmp_path):
    from models.grove import Grove
    from models.grove.configuration import tiny_configs
    from models.grove.processing import GroveProcessor
    from models.tiny_tokenizer import build_tiny_tokenizer

    meta = json.loads((mevis_split / "meta_expressions.json").read_text())
    meta["videos"]["v2"]["expressions"]["1"] = {"exp": "the [DET] square", "obj_id": [1], "anno_id": [2]}
    (mevis_split / "meta_expressions.json").write_text(json.dumps(meta))
    torch.manual_seed(0)
    model = Grove(**tiny_configs(), tokenizer=build_tiny_tokenizer(tmp_path / "tok")).eval()
    processor = GroveProcessor({"num_frames": 2, "global_image_size": 64, "grounding_image_size": 128},
                               {"objectness_threshold": 0.0})
    out = tmp_path / "submission"
    counts = predict_benchmark(model_grounder(model, processor), model_check(model),
                               mevis_split / "meta_expressions.json", mevis_split / "JPEGImages", out, "mevis")
    assert counts == {"videos": 2, "expressions": 5, "refused": 1}
    assert "reserved token" in json.loads((out / "refused.json").read_text())["v2_1"]
    predictions = json.loads((out / "predictions.json").read_text())
    assert sorted(predictions) == ["v1_0", "v1_1", "v1_2", "v2_0"]
    assert [f["frame"] for f in predictions["v1_0"]["frames"]] == [0, 1, 2, 3]  # threshold 0: every frame
    for key, entry in predictions.items():
        for frame in entry["frames"]:
            x1, y1, x2, y2 = frame["boxes"][0]
            assert 0 <= x1 <= x2 <= WIDTH and 0 <= y1 <= y2 <= HEIGHT and frame["masks"][0]["size"] == [HEIGHT, WIDTH]
    refused = [np.asarray(Image.open(p)) for p in sorted((out / "v2" / "1").glob("*.png"))]
    assert len(refused) == 3 and not any(m.any() for m in refused)
    (mevis_split / "meta_expressions.json").write_text(json.dumps(meta))
    metrics = mevis_main(["--split", str(mevis_split), "--pred", str(out)])
    assert 0.0 <= metrics["J&F"] < 1.0 and metrics["num_expressions"] == 5
