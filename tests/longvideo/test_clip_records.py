"""Per-clip records of the long synthetic videos: the clips and keys of long-video predict, the truth's
boxes, captions tagging the visible objects, and the project's clip metrics scored against them."""
from core.json_file import JSONFileError

import json

import numpy as np
import pytest

from command_line.synthetic_data import clip_records_main
from formats.records import read_records, tagged_phrases
from longvideo.clip_records import clip_caption, clip_records_path, records_from_truth
from longvideo.clip_scoring import score_run_clips
from longvideo.datamodule import LongVideoClips
from longvideo.scoring import clips_from_truth
from longvideo.synthetic_long import LongVideoConfig, generate_long_video
from tests.fixtures.long_clips import hand_truth, perfect_predictions, run_files

# 30 s at 10 fps: 150 grid frames, clips of 4 s (20 grid frames): 7 tiled and one aligned to the end
CONFIG = LongVideoConfig(duration_s=30.0, fps=10.0, width=320, height=180, num_objects=4, look_alikes=1,
                         visit_s=(4.0, 10.0), absence_s=(3.0, 8.0), seed=3)
SIZES = dict(num_frames=4, global_image_size=32, grounding_image_size=32)
FAST = dict(text_encoder="exact", caption_metrics=(), capture=False)


@pytest.fixture(scope="module")
def long_video(tmp_path_factory):
    path = tmp_path_factory.mktemp("clips") / "walk.mp4"
    truth = generate_long_video(path, CONFIG, clip_seconds=4.0)
    return path, truth, read_records(clip_records_path(path.with_suffix(".json")))


def test_keys_and_frames_are_those_long_video_predict_gives(long_video):
    path, truth, records = long_video
    clips = [e for s in LongVideoClips(path, clip_seconds=4.0, **SIZES) for e in s["long_video"] if e["kind"] == "clip"]
    assert len(clips) == 8  # the last aligned to the end: frames 260..299
    assert [r.key for r in records] == [c["key"] for c in clips]
    assert [(r.clip_start_frame, r.clip_end_frame) for r in records] == [(c["start_frame"], c["end_frame"])
                                                                          for c in clips]
    assert [r.frame_indices.tolist() for r in records] == [c["frames"] for c in clips]
    # the linking-alone clips are cut the same way
    assert [c["key"] for c in clips_from_truth(truth, clip_seconds=4.0)[0]] == [r.key for r in records]


def test_boxes_are_the_truths_and_the_caption_tags_the_visible_objects(long_video):
    _, truth, records = long_video
    frames = {f["frame"]: f for f in truth["frames"]}
    phrase_of = {o["id"]: o["phrase"] for o in truth["objects"]}
    look_alikes = 0
    for record in records:
        objects = record.extra["long_synthetic"]["objects"]
        name = {o["id"]: o["phrase"] for o in objects}
        visible = [i for f in record.frame_indices for i in frames[int(f)]["ids"]]
        assert sorted(name) == sorted(set(visible))
        assert [o["id"] for o in objects] == list(dict.fromkeys(visible))  # order of first appearance
        assert tagged_phrases(record.tagged_caption) == record.phrases == [o["phrase"] for o in objects]
        for i, p in name.items():  # the object's colour and shape, "another" for a second look-alike
            assert p.split()[-2:] == phrase_of[i].split()[-2:]
            assert p == phrase_of[i] or p == "another " + " ".join(phrase_of[i].split()[-2:])
        look_alikes += any(p.startswith("another ") for p in name.values())
        for f, boxes, labels in zip(record.frame_indices, record.bboxes, record.labels):
            entry = frames[int(f)]
            np.testing.assert_allclose(boxes, np.asarray(entry["boxes"]).reshape(-1, 4), rtol=0, atol=1e-4)
            assert labels == [name[i] for i in entry["ids"]]
    assert look_alikes >= 1  # the look-alike pair shares a clip at least once


def test_hand_made_truth_gives_the_hand_written_records(tmp_path):
    truth = hand_truth()
    first, second = records_from_truth(truth, clip_seconds=2.0)
    assert (first.key, first.clip_start_frame, first.clip_end_frame) == ("hand_0", 0, 9)
    assert (second.key, second.clip_start_frame, second.clip_end_frame) == ("hand_1", 2, 11)
    assert first.tagged_caption == "<p>a red circle</p> and <p>a yellow cross</p> move across the scene."
    assert second.tagged_caption == ("<p>a red circle</p>, <p>a yellow cross</p> and <p>another yellow cross</p> "
                                     "move across the scene.")
    assert second.caption == "a red circle, a yellow cross and another yellow cross move across the scene."
    assert second.labels[-1] == ["a yellow cross", "another yellow cross"]  # frame 11: objects 1 and 2
    assert second.bboxes[0].tolist() == [[12.0, 10.0, 32.0, 30.0]]  # frame 2: object 0 only
    assert clip_caption(["a red circle"]) == "<p>a red circle</p> moves across the scene."
    assert clip_caption([]) == clip_caption([], tagged=False) == "nothing moves across the scene."
    # the command writes the same records for a truth made earlier
    (tmp_path / "hand.json").write_text(json.dumps(truth))
    out = clip_records_main([str(tmp_path / "hand.json"), "--clip-seconds", "2"])
    assert out == tmp_path / "hand_clips.json"
    assert [r.to_dict() for r in read_records(out)] == [first.to_dict(), second.to_dict()]


def test_bad_truth_is_named(tmp_path):
    truth = hand_truth()
    del truth["objects"]
    with pytest.raises(ValueError, match=r"t\.json: missing field\(s\) objects"):
        records_from_truth(truth, source="t.json")
    with pytest.raises(ValueError, match="not a long synthetic ground truth"):
        records_from_truth({"format": "grove-timeline"}, source="t.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(JSONFileError, match=r"bad.json: not valid JSON \(.* line 1, column 2\)"):
        clip_records_main([str(tmp_path / "bad.json")])


def test_predictions_made_of_the_truth_score_one_and_hand_perturbed_ones_drop_as_computed(tmp_path):
    truth = hand_truth()
    records = records_from_truth(truth, clip_seconds=2.0)
    perfect = perfect_predictions(records)
    timeline, path = run_files(tmp_path, truth, perfect)
    metrics = score_run_clips(truth, timeline, path, clip_seconds=2.0, **FAST)["metrics"]
    for name in ("AP50", "mIoU", "recall", "AP50_frame", "mIoU_frame", "recall_frame"):
        assert metrics[name] == pytest.approx(1.0), name

    # clip 0, frame 0: the red circle's box [10, 10, 30, 30] moved 5 px right: IoU 15*20 / (25*20) = 0.6,
    # still a hit at 0.5, so AP50 and recall stay 1 and only that frame's mean IoU drops.
    moved = json.loads(json.dumps(perfect))
    moved["hand_0"]["frames"][0]["boxes"][0] = [15.0, 10.0, 35.0, 30.0]
    timeline, path = run_files(tmp_path, truth, moved)
    metrics = score_run_clips(truth, timeline, path, clip_seconds=2.0, **FAST)["metrics"]
    assert metrics["AP50"] == pytest.approx(1.0) and metrics["recall"] == pytest.approx(1.0)
    # video level: clip 0 has 10 frames with a box, one at 0.6; clip 1 is perfect
    assert metrics["mIoU"] == pytest.approx(((9 + 0.6) / 10 + 1.0) / 2)
    assert metrics["mIoU_frame"] == pytest.approx((20 - 1 + 0.6) / 20)  # 10 + 10 frames with a box

    # clip 1: the look-alike called "a blue cross" (a phrase of its caption): boxes exact, so AP50 and mIoU
    # stay 1, but its 2 boxes (frames 10, 11) no longer match by phrase: recall of clip 1 is 1 - 2/n.
    renamed = json.loads(json.dumps(perfect))
    clip = renamed["hand_1"]
    clip["phrases"][2] = "a blue cross"
    for frame in clip["frames"]:
        frame["labels"] = ["a blue cross" if label == "another yellow cross" else label for label in frame["labels"]]
    timeline, path = run_files(tmp_path, truth, renamed)
    metrics = score_run_clips(truth, timeline, path, clip_seconds=2.0, **FAST)["metrics"]
    boxes_1 = sum(len(b) for b in records[1].bboxes)  # frames 2..11: red 4, cross 9, look-alike 2
    assert boxes_1 == 15
    assert metrics["AP50"] == pytest.approx(1.0) and metrics["mIoU"] == pytest.approx(1.0)
    assert metrics["recall"] == pytest.approx((1.0 + 13 / 15) / 2)
    boxes_0 = sum(len(b) for b in records[0].bboxes)  # frames 0..9: red 6, cross 7
    assert metrics["recall_frame"] == pytest.approx((boxes_0 + 13) / (boxes_0 + 15))

    # clip 0 without its last predicted box (frame 9, the cross): 12 of 13 found, all ranked first at the
    # constant score, so precision is 1 up to recall 12/13 and COCO's 101-point AP is 93/101 (r = 0 .. 0.92).
    dropped = json.loads(json.dumps(perfect))
    last = dropped["hand_0"]["frames"][-1]
    assert last["frame"] == 9 and last["labels"] == ["a yellow cross"]
    dropped["hand_0"]["frames"].pop()
    timeline, path = run_files(tmp_path, truth, dropped)
    metrics = score_run_clips(truth, timeline, path, clip_seconds=2.0, **FAST)["metrics"]
    assert metrics["AP50"] == pytest.approx((93 / 101 + 1.0) / 2)
    assert metrics["recall"] == pytest.approx((12 / 13 + 1.0) / 2)
    assert metrics["mIoU"] == pytest.approx((9 / 10 + 1.0) / 2)  # frame 9 had one box, now none: 0


def test_a_run_cut_otherwise_is_refused_with_the_clip_that_differs(tmp_path):
    truth = hand_truth()
    perfect = perfect_predictions(records_from_truth(truth, clip_seconds=1.0))
    timeline, path = run_files(tmp_path, truth, perfect, clip_seconds=1.0)
    with pytest.raises(ValueError, match=r"segment 'hand_0' covers frames 0\.\.4 but the ground truth's clip "
                                         r"covers 0\.\.9.*--clip-seconds"):
        score_run_clips(truth, timeline, path, clip_seconds=2.0, **FAST)
    with pytest.raises(ValueError, match="segmenter 'shots'"):
        score_run_clips(truth, timeline | {"segmenter": "shots"}, path, clip_seconds=1.0, **FAST)


def test_the_truth_of_another_video_is_refused_before_the_clips_are_compared(tmp_path):
    truth = hand_truth()
    timeline, path = run_files(tmp_path, truth, perfect_predictions(records_from_truth(truth, clip_seconds=2.0)))
    longer = truth | {"num_frames": truth["num_frames"] + 30, "width": truth["width"] + 2}
    with pytest.raises(ValueError, match=rf"{truth['num_frames'] + 30} frames in the truth, {truth['num_frames']} "
                                         rf"in the timeline.*frame size {truth['width'] + 2}x"):
        score_run_clips(longer, timeline, path, clip_seconds=2.0, **FAST)
