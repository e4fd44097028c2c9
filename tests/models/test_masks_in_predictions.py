"""Masks in the predictions: written beside the boxes by the one prediction path (at the video's frame
size, frames read again or handed over), kept through a predictions file, checked by the validation."""
import core  # noqa: F401

import numpy as np
import pytest
import torch

from formats.mask_rle import decode_masks, encode_masks
from formats.predictions import load_predictions, write_predictions
from formats.video_reader import PyAVVideoSource
from formats.video_writer import write_video
from metrics.evaluator.prediction_validation import InvalidPredictionError, validate_predictions
from models.grove.postprocessing import format_clip_predictions
from models.grove.processing import _clip_frames
from models.masks import SAM2FrameMasker
from tests.fixtures.paths import ROOT

TINY = str(ROOT / "configs" / "annotation" / "models" / "sam2_tiny_random.yaml")


def _batch(video_fname="", width=64, height=48):
    """Two clips: the first 3 real frames of 4 (one padded), 2 phrases; the second 4 frames, 1 phrase."""
    boxes = torch.tensor([0.5, 0.5, 0.5, 0.5]).expand(2, 4, 2, 4).clone()
    boxes[1, :, 0] = torch.tensor([0.25, 0.25, 0.3, 0.3])
    scores = torch.tensor([[[0.9, 0.2], [0.8, 0.7], [0.3, 0.6], [0.9, 0.9]],
                           [[0.6, 0.0], [0.1, 0.0], [0.7, 0.0], [0.55, 0.0]]])
    batch = {"keys": ["a_0", "b_0"], "size": torch.tensor([[width, height]] * 2),
             "frame_mask": torch.tensor([[True, True, True, False], [True] * 4]),
             "frame_indices": torch.tensor([[0, 5, 10, -1], [0, 5, 10, 15]]),
             "video_fnames": [video_fname] * 2}
    return batch, boxes, scores


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 60, (20, 48, 64, 3), dtype=np.uint8)
    frames[:, 10:30, 16:48] = 230
    return write_video(tmp_path_factory.mktemp("masks") / "clip.mp4", frames, fps=25)


@pytest.fixture(scope="module")
def masker():
    return SAM2FrameMasker(TINY, device="cpu")


def test_every_kept_box_gets_a_mask_of_the_video_frame_size(video, masker):
    batch, boxes, scores = _batch(str(video))
    out = format_clip_predictions(batch, ["<p> x </p> [DET] <p> y </p> [DET]", "<p> z </p> [DET]"],
                                  [["x", "y"], ["z"]], boxes, scores, None, 0.5, False, True, masker,
                                  _clip_frames(batch, "/"))
    # kept (score >= 0.5): clip a frames 0 [x], 5 [x, y], 10 [y]; clip b frames 0, 10, 15 [z]
    assert [(f["frame"], f["labels"]) for f in out["a_0"]["frames"]] == [(0, ["x"]), (5, ["x", "y"]), (10, ["y"])]
    assert [f["frame"] for f in out["b_0"]["frames"]] == [0, 10, 15]
    for clip in out.values():
        for frame in clip["frames"]:
            assert len(frame["masks"]) == len(frame["boxes"])
            assert decode_masks(frame["masks"]).shape == (len(frame["boxes"]), 48, 64)
    # the frames were read again at the clip's own indices: a mask equals the masker's on those frames
    with PyAVVideoSource(video) as source:
        frames = source.read_frames([0, 5, 10])
    px = np.array(out["a_0"]["frames"][1]["boxes"], np.float32)
    direct = masker(frames[1:2], px[None], np.ones((1, 2), bool), np.ones((1, 2)))
    assert direct[0] == out["a_0"]["frames"][1]["masks"]
    # no masker: no masks key, the rest unchanged
    plain = format_clip_predictions(batch, ["<p> x </p> [DET] <p> y </p> [DET]", "<p> z </p> [DET]"],
                                    [["x", "y"], ["z"]], boxes, scores, None, 0.5, False)
    assert all("masks" not in f for c in plain.values() for f in c["frames"])
    assert [{k: v for k, v in f.items() if k != "masks"} for f in out["a_0"]["frames"]] == plain["a_0"]["frames"]


def test_frames_carried_by_the_batch_are_used_at_the_record_size(masker):
    batch, boxes, scores = _batch("/nonexistent.mp4", width=64, height=48)
    small = np.zeros((4, 24, 32, 3), np.uint8)  # half the record's size: fitted to it, not read from disk
    batch["source_frames"] = [small[:3], small]
    frames = _clip_frames(batch, "/")
    assert frames(0).shape == (3, 48, 64, 3) and frames(1).shape == (4, 48, 64, 3)
    out = format_clip_predictions(batch, ["<p> x </p> [DET] <p> y </p> [DET]", "<p> z </p> [DET]"],
                                  [["x", "y"], ["z"]], boxes, scores, None, 0.5, False, True, masker, frames)
    assert decode_masks(out["b_0"]["frames"][0]["masks"]).shape == (1, 48, 64)


def _prediction(masks):
    return {"v_0": {"caption": "a dog", "tagged_caption": "<p> a dog </p> [DET]", "phrases": ["a dog"],
                    "frames": [{"frame": 0, "boxes": [[1, 1, 5, 5], [2, 2, 6, 6]], "labels": ["a dog", "a dog"],
                                "scores": [0.9, 0.8], "masks": masks}]}}


def test_masks_survive_a_predictions_file_and_validate(tmp_path):
    truth = np.zeros((2, 8, 10), bool)
    truth[0, 1:5, 1:5] = True
    rles = [encode_masks(truth[0])[0], None]
    path = write_predictions(_prediction(rles), tmp_path / "predictions.json")
    back = load_predictions(path)
    checked, report = validate_predictions(back, {"v_0": (10, 8)})
    assert report.skipped_boxes == 0 and checked["v_0"]["frames"][0]["masks"][1] is None
    np.testing.assert_array_equal(decode_masks(checked["v_0"]["frames"][0]["masks"][:1])[0], truth[0])


@pytest.mark.parametrize("masks, message", [
    ([None], r"must be a list parallel to boxes \(2\), got 1 entries"),
    ({"size": [8, 10]}, "must be a list parallel to boxes"),
    ([None, [1, 2, 3]], r"\[1\]: a mask is a COCO RLE"),
    ([None, {"size": [8, 10], "counts": [80]}], r"\[1\]: a mask is a COCO RLE"),
    ([None, {"size": [9, 10], "counts": "PT2"}], r"\[1\]: mask size \[9, 10\] is not the frame's"),
    ([None, {"size": [8, 10], "counts": "@@@@"}], r"\[1\]: RLE counts are not a valid compressed RLE"),
])
def test_malformed_masks_are_refused_naming_clip_frame_and_mask(masks, message):
    for policy in ("error", "skip"):
        with pytest.raises(InvalidPredictionError, match=r"x.json, clip 'v_0', frame 0 \(frames\[0\]\), field 'masks'"):
            validate_predictions(_prediction(masks), {"v_0": (10, 8)}, policy=policy, source="x.json")
        with pytest.raises(InvalidPredictionError, match=message):
            validate_predictions(_prediction(masks), {"v_0": (10, 8)}, policy=policy, source="x.json")


def test_a_dropped_box_takes_its_mask_along_and_files_without_masks_are_unchanged():
    rles = encode_masks(np.zeros((2, 8, 10), bool))
    pred = _prediction(rles)
    pred["v_0"]["frames"][0]["boxes"][0] = [5, 5, 1, 1]  # inverted
    checked, report = validate_predictions(pred, {"v_0": (10, 8)}, policy="skip")
    assert report.skipped_boxes == 1 and checked["v_0"]["frames"][0]["masks"] == [rles[1]]
    plain = _prediction(None)
    del plain["v_0"]["frames"][0]["masks"]
    checked, report = validate_predictions(plain, {"v_0": (10, 8)})
    assert checked is not plain and checked["v_0"] is plain["v_0"] and report.skipped_boxes == 0


def test_the_run_check_accepts_pycocotools_strings_and_not_cut_ones():
    from formats.mask_rle import rle_runs_total as _rle_runs_total

    rng = np.random.default_rng(5)
    for density in (0.0, 0.02, 0.5, 0.98, 1.0):
        masks = rng.random((4, 37, 53)) < density
        for rle in encode_masks(masks):
            assert _rle_runs_total(rle["counts"]) == 37 * 53
    cut = encode_masks(rng.random((37, 53)) < 0.5)[0]["counts"]
    # the last run dropped (shorter) or its last character cut (a continued number that never ends)
    assert _rle_runs_total(cut[:-1]) != 37 * 53
    assert _rle_runs_total("0") == 0 and _rle_runs_total("@@@@") != 80


def test_the_processor_returns_a_mask_per_box_with_a_masker(video, masker, monkeypatch):
    from models.grove import Grove
    from models.grove.configuration import tiny_configs
    from models.grove.processing import GroveProcessor

    torch.manual_seed(0)
    model = Grove(**tiny_configs()).eval()
    model.prompter = model.make_prompter(sample_question=False, template="plain")
    monkeypatch.setattr(Grove, "generate_captions", lambda self, frames, max_new_tokens=64, video_embeds=None:
                        ["a <p> bright block </p> [DET] on <p> the ground </p> [DET]"] * len(frames))
    preprocessing = {"num_frames": 4, "global_image_size": 64, "grounding_image_size": 128}
    with_masks = GroveProcessor(preprocessing, masker=masker).generate(model, str(video), None, "cpu",
                                                                       temp_objectness_threshold=0.0)
    plain = GroveProcessor(preprocessing).generate(model, str(video), None, "cpu", temp_objectness_threshold=0.0)
    assert "masks" not in plain and with_masks["text"] == plain["text"]
    assert len(with_masks["masks"]) == len(with_masks["bboxes"]) == len(with_masks["frame_indices"]) == 4
    for boxes, masks in zip(with_masks["bboxes"], with_masks["masks"]):
        assert len(masks) == len(boxes) == 2
        assert decode_masks(masks).shape == (2, 48, 64)
    torch.testing.assert_close(with_masks["bboxes"][0], plain["bboxes"][0])
