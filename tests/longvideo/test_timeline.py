"""The timeline: built from per-clip predictions, checked by its JSON Schema; the appearance cue's pooling."""
import json

import numpy as np
import pytest
import torch

from formats.mask_rle import decode_masks, encode_masks
from longvideo.appearance import box_cells, phrase_appearance, pooled_box_features
from longvideo.timeline import build_timeline, clip_tubes, timeline_document, timeline_problems

VIDEO = {"video_id": "v", "path": "/videos/v.mp4", "fps": 30.0, "num_frames": 300, "width": 320, "height": 180}


def prediction(caption, boxes_by_phrase, frames):
    """A prediction-format entry: ``boxes_by_phrase[phrase]`` is a constant box on every frame."""
    phrases = list(boxes_by_phrase)
    return {"caption": caption, "tagged_caption": caption, "phrases": phrases,
            "frames": [{"frame": f, "boxes": [boxes_by_phrase[p] for p in phrases], "labels": phrases,
                        "scores": [0.9] * len(phrases)} for f in frames]}


def clip(key, index, first, n=5, shot=0):
    frames = [first + 6 * i for i in range(n)]
    return {"key": key, "clip": index, "shot": shot, "frames": frames, "start_frame": first,
            "end_frame": frames[-1] + 5}


def test_clip_tubes_reads_the_prediction_format():
    pred = prediction("x", {"a cup": [1, 2, 3, 4], "a knife": [5, 6, 7, 8]}, [0, 12])
    tubes = clip_tubes([0, 6, 12], pred)
    assert tubes.phrases == ["a cup", "a knife"]
    assert tubes.present.tolist() == [[True, False, True], [True, False, True]]
    np.testing.assert_array_equal(tubes.boxes[1, 2], [5, 6, 7, 8])


def test_timeline_links_clips_and_marks_the_gap():
    ball, cup = [10, 10, 50, 50], [200, 100, 240, 140]
    clips = [clip("v_0", 0, 0), clip("v_1", 1, 30), clip("v_2", 2, 120, shot=1)]
    predictions = {"v_0": prediction("A ball rolls.", {"a ball": ball}, clips[0]["frames"]),
                   "v_1": prediction("The ball stops by a cup.", {"the ball": ball, "a cup": cup}, clips[1]["frames"]),
                   "v_2": prediction("A cup.", {"a cup": cup}, clips[2]["frames"])}
    text = {"a ball": np.array([1.0, 0]), "the ball": np.array([0.98, 0.2]) / np.hypot(0.98, 0.2),
            "a cup": np.array([0, 1.0])}
    gap = {"first_frame": 60, "last_frame": 114, "start_s": 2.0, "end_s": 3.833, "reason": "InvalidDataError: x"}
    timeline = build_timeline(VIDEO, clips[::-1], predictions, [gap], text_vectors=text)
    assert [s["key"] for s in timeline["segments"]] == ["v_0", "v_1", "v_2"]  # time order
    links = [[(p["phrase"], p["entity"]) for p in s["phrases"]] for s in timeline["segments"]]
    assert links == [[("a ball", 0)], [("the ball", 0), ("a cup", 1)], [("a cup", 1)]]
    ball_entity = timeline["entities"][0]
    assert ball_entity["name"] in ("a ball", "the ball") and ball_entity["segments"] == ["v_0", "v_1"]
    assert [p["frame"] for p in ball_entity["tube"]] == list(range(0, 60, 6))
    assert ball_entity["first_s"] == 0.0 and ball_entity["last_s"] == pytest.approx(54 / 30, abs=1e-3)
    assert timeline["gaps"][0]["reason"] == "InvalidDataError: x"
    assert timeline["story"]["captions"] == ["A ball rolls.", "The ball stops by a cup.", "A cup."]
    document = timeline_document([timeline])
    assert timeline_problems(json.loads(json.dumps(document))) == []


def _square_mask(x1, y1, x2, y2, shape=(180, 320)):
    mask = np.zeros(shape, bool)
    mask[y1:y2, x1:x2] = True
    return encode_masks(mask)[0]


def test_an_entitys_tube_keeps_the_masks_of_its_kept_boxes():
    ball = [10, 10, 50, 50]
    clips = [clip("v_0", 0, 0), clip("v_1", 1, 12)]  # overlapping: frames 12 and 24 are in both
    first = prediction("A ball.", {"a ball": ball}, clips[0]["frames"])
    second = prediction("The ball.", {"a ball": ball}, clips[1]["frames"])
    for k, entry in enumerate(first["frames"]):
        entry["masks"] = [_square_mask(10 + k, 10, 30 + k, 30)] if k != 1 else [None]  # frame 6: no mask
    for entry in second["frames"]:
        entry["scores"] = [0.95] if entry["frame"] == 24 else [0.5]  # wins frame 24 only, without a mask
    timeline = build_timeline(VIDEO, clips, {"v_0": first, "v_1": second})
    (entity,) = timeline["entities"]
    masks = {p["frame"]: p.get("mask") for p in entity["tube"]}
    assert sorted(masks) == [0, 6, 12, 18, 24, 30, 36]
    # frame 12: the first clip's box (0.9 over 0.5) and its mask; frame 24: the second's, which has none
    assert [f for f, m in masks.items() if m is not None] == [0, 12, 18]
    mask_12 = decode_masks([masks[12]])[0]
    assert mask_12[10:30, 12:32].all() and mask_12.sum() == 400
    assert timeline_problems(json.loads(json.dumps(timeline_document([timeline])))) == []
    plain = build_timeline(VIDEO, clips, {"v_0": prediction("A ball.", {"a ball": ball}, clips[0]["frames"]),
                                          "v_1": second})
    assert all("mask" not in p for p in plain["entities"][0]["tube"])  # no masks given: none written
    broken = json.loads(json.dumps(timeline_document([timeline])))
    broken["videos"][0]["entities"][0]["tube"][0]["mask"] = {"size": [180, 320], "counts": [1, 2]}
    assert any("tube/0/mask/counts" in p for p in timeline_problems(broken))


def test_a_skipped_clip_is_a_segment_without_caption():
    clips = [clip("v_0", 0, 0), clip("v_1", 1, 30)]
    timeline = build_timeline(VIDEO, clips, {"v_1": prediction("A cup.", {"a cup": [0, 0, 9, 9]}, [30])})
    assert [s["caption"] for s in timeline["segments"]] == [None, "A cup."]
    assert timeline["segments"][0]["phrases"] == []
    assert timeline_problems(timeline_document([timeline])) == []


def test_schema_names_what_is_wrong():
    timeline = build_timeline(VIDEO, [clip("v_0", 0, 0)], {"v_0": prediction("A cup.", {"a cup": [0, 0, 9, 9]}, [0])})
    del timeline["entities"][0]["name"]
    timeline["segments"][0]["start_s"] = "soon"
    problems = timeline_problems(timeline_document([timeline]))
    assert any(p.startswith("videos/0/entities/0") and "'name' is a required property" in p for p in problems)
    assert any(p.startswith("videos/0/segments/0/start_s") for p in problems)
    assert timeline_problems({"format": "other", "version": 1, "videos": []})


def test_box_cells_map_pixels_onto_the_padded_square():
    # a 320 x 180 frame on an 8 x 8 map: 40 px per cell on both axes (the longest side fills the map)
    cells = box_cells(np.array([[40, 0, 120, 40], [0, 170, 5, 175]]), 320, 180, 8)
    assert cells.tolist() == [[1, 0, 3, 1], [0, 4, 1, 5]]  # a tiny box keeps the cell under its centre


def test_pooled_features_are_the_mean_inside_the_box():
    rng = np.random.default_rng(0)
    features = torch.from_numpy(rng.normal(size=(3, 5, 8, 8)))
    boxes = np.array([[40, 0, 120, 40], [0, 40, 320, 160]])
    pooled = pooled_box_features(features, np.array([2, 0]), boxes, 320, 180)
    np.testing.assert_allclose(pooled[0], features[2, :, 0:1, 1:3].mean((1, 2)).numpy(), rtol=1e-5)
    np.testing.assert_allclose(pooled[1], features[0, :, 1:4, 0:8].mean((1, 2)).numpy(), rtol=1e-5)


def test_phrase_appearance_is_one_unit_vector_per_phrase():
    features = torch.zeros((2, 3, 4, 4))
    features[:, 0, :2, :2] = 1.0  # channel 0 lights up the top-left quarter, channel 1 the rest
    features[:, 1] = 1.0 - features[:, 0]
    pred = prediction("x", {"a": [0, 0, 50, 50], "b": [50, 50, 100, 100]}, [0, 6])
    vectors = phrase_appearance(features, np.array([0, 6]), pred, 100, 100)
    np.testing.assert_allclose(vectors, [[1, 0, 0], [0, 1, 0]], atol=1e-6)


def test_text_vectors_embed_each_phrase_of_the_predictions_once_as_a_unit_vector():
    from longvideo.timeline import text_vectors

    predictions = {"c0": {"phrases": ["a cat", "a dog"]}, "c1": {"phrases": ["a cat"]}, "c2": {}}
    vectors = text_vectors(predictions, "exact")
    assert sorted(vectors) == ["a cat", "a dog"]
    assert all(abs(float(np.linalg.norm(v)) - 1.0) < 1e-6 for v in vectors.values())
    assert abs(float(vectors["a cat"] @ vectors["a dog"])) < 1e-6  # exact match: distinct phrases are orthogonal
    assert text_vectors({"c0": {"phrases": []}}, "exact") == {}
