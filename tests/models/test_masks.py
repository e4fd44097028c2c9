"""Box-prompted maskers on tiny random SAM 2s: a mask for every kept box at the frames' size, the frame
mode's batching, and the video mode's re-prompting where a box and its propagated mask part ways."""
import core  # noqa: F401

import numpy as np
import pytest
import torch

from annotation.stage3.trackers.sam2_tracker import tight_boxes
from formats.mask_rle import decode_masks, encode_masks, mask_boxes
from models.masks import SAM2FrameMasker, SAM2VideoMasker, SAMFrameMasker
from models.masks.box_masker import paired_box_iou, tight_boxes_torch
from models.masks.clip_frames import fit_frames
from tests.fixtures.paths import ROOT

TINY = str(ROOT / "configs" / "annotation" / "models" / "sam2_tiny_random.yaml")
# a tiny original SAM (the segment_anything classes with small sizes, random weights)
TINY_SAM = {"embed_dim": 32, "depth": 2, "num_heads": 2, "global_attn_indexes": [1], "image_size": 64,
            "window_size": 2, "prompt_dim": 32, "decoder_mlp_dim": 64, "decoder_heads": 2}


def _clip(n=6, h=40, w=56, seed=0):
    """Frames with two bright rectangles on a dark ground, their boxes (one phrase drops a frame)."""
    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 40, (n, h, w, 3), dtype=np.uint8)
    boxes = np.zeros((n, 2, 4), np.float32)
    for f in range(n):
        boxes[f, 0] = [4 + f, 5, 24 + f, 28]
        boxes[f, 1] = [30, 12 + f, 52, 36]
        for p, color in ((0, (250, 30, 30)), (1, (30, 250, 30))):
            x1, y1, x2, y2 = boxes[f, p].astype(int)
            frames[f, y1:y2, x1:x2] = color
    keep = np.ones((n, 2), bool)
    keep[2, 1] = False
    scores = np.linspace(0.5, 0.9, n * 2).reshape(n, 2)
    return frames, boxes, keep, scores


@pytest.fixture(scope="module")
def video_masker():
    # seed 3: the random tiny SAM 2 whose masks are neither empty nor the whole frame on these clips
    return SAM2VideoMasker(TINY, device="cpu", seed=3)


@pytest.mark.parametrize("make", [lambda: SAM2VideoMasker(TINY, device="cpu"),
                                  lambda: SAM2FrameMasker(TINY, device="cpu", frames_per_batch=4),
                                  lambda: SAMFrameMasker(TINY_SAM, device="cpu", frames_per_batch=4)])
def test_every_kept_box_gets_a_mask_of_the_frames_size(make):
    frames, boxes, keep, scores = _clip()
    answer = make()(frames, boxes, keep, scores)
    assert len(answer) == 6 and all(len(row) == 2 for row in answer)
    for f in range(6):
        for p in range(2):
            if not keep[f, p]:
                assert answer[f][p] is None
                continue
            assert answer[f][p]["size"] == [40, 56] and isinstance(answer[f][p]["counts"], str)
            assert decode_masks([answer[f][p]]).shape == (1, 40, 56)


def test_nothing_kept_means_no_mask_and_no_model(video_masker):
    frames, boxes, keep, scores = _clip()
    fresh = SAM2VideoMasker(TINY, device="cpu")
    assert fresh(frames, boxes, np.zeros_like(keep), scores) == [[None, None]] * 6
    assert fresh._model is None
    with pytest.raises(ValueError, match="keep"):
        video_masker(frames, boxes, keep[:, :1], scores)


def test_frame_mode_masks_do_not_depend_on_the_other_frames_or_the_batching():
    frames, boxes, keep, scores = _clip()
    whole = SAM2FrameMasker(TINY, device="cpu", frames_per_batch=6)(frames, boxes, keep, scores)
    pairs = SAM2FrameMasker(TINY, device="cpu", frames_per_batch=2)(frames, boxes, keep, scores)
    alone = SAM2FrameMasker(TINY, device="cpu")(frames[3:4], boxes[3:4], keep[3:4], scores[3:4])
    covered = [decode_masks([x]).mean() for row in whole for x in row if x is not None]
    assert 0 < min(covered) and max(covered) < 1  # neither empty nor the whole frame: the comparisons test something
    for a, b in zip(whole, pairs):
        for x, y in zip(a, b):
            if x is not None:  # bf16 autocast: allow a pixel or two at a logit's zero crossing
                assert (decode_masks([x]) != decode_masks([y])).sum() <= 2
    assert all((decode_masks([x]) != decode_masks([y])).sum() <= 2 for x, y in zip(whole[3], alone[0]))


def test_video_mode_reprompts_exactly_where_a_box_jumps_away_from_its_mask(video_masker):
    """Boxes equal to the propagated masks' own tight boxes agree everywhere; a box moved far away on
    one frame is the one disagreement, so the second round adds exactly that prompt."""
    frames, boxes, keep, scores = _clip()
    keep[:] = True
    once = SAM2VideoMasker(TINY, device="cpu", reprompt_rounds=0)
    once._model = video_masker.model  # the same weights: its one round is the first round of the other
    first = once(frames, boxes, keep, scores)
    anchors = once.prompted[0]
    assert anchors.sum() == 2 and anchors[5].all()  # the most confident frame of each phrase is the last
    # the propagated masks' tight boxes become the boxes, except on the anchor frame (the same prompt)
    agreeing = np.array([[mask_boxes([r])[0] for r in row] for row in first], np.float32)
    non_empty = np.array([[decode_masks([r]).any() for r in row] for row in first])
    agreeing[5] = boxes[5]
    keep = non_empty.copy()
    keep[5] = True
    candidates = [f for f in range(5) if keep[f, 0]]
    assert candidates, "the tiny model's masks are empty everywhere: the case tests nothing"
    jump = candidates[0]
    h, w = frames.shape[1:3]
    mask_box = agreeing[jump, 0].astype(float)
    agreeing[jump, 0] = [w - 6, h - 6, w, h]  # a 6-pixel box in a corner: far below the IoU threshold
    assert paired_box_iou(agreeing[jump, 0].astype(float), mask_box) < video_masker.reprompt_iou
    video_masker(frames, agreeing, keep, scores)
    assert len(video_masker.prompted) == 2
    np.testing.assert_array_equal(video_masker.prompted[0], anchors)
    added = video_masker.prompted[1] & ~video_masker.prompted[0]
    expected = np.zeros_like(added)
    expected[jump, 0] = True
    np.testing.assert_array_equal(added, expected)


def test_no_reprompt_rounds_prompts_once(video_masker):
    frames, boxes, keep, scores = _clip()
    masker = SAM2VideoMasker(TINY, device="cpu", reprompt_rounds=0)
    masker._model = video_masker.model
    masker(frames, boxes, keep, scores)
    assert len(masker.prompted) == 1
    with pytest.raises(ValueError, match="reprompt_iou"):
        SAM2VideoMasker(TINY, reprompt_iou=1.5)


def test_tight_boxes_and_paired_iou_against_independent_references():
    rng = np.random.default_rng(3)
    masks = rng.random((5, 9, 11)) > 0.93
    masks[2] = False
    got = tight_boxes_torch(torch.from_numpy(masks)).numpy()
    want, present = tight_boxes(masks)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got[present], mask_boxes(encode_masks(masks[present])))
    a = np.array([[0, 0, 10, 10], [0, 0, 10, 10], [0, 0, 0, 0]], float)
    b = np.array([[5, 5, 15, 15], [0, 0, 10, 10], [0, 0, 0, 0]], float)
    np.testing.assert_allclose(paired_box_iou(a, b), [25 / 175, 1.0, 0.0])


def test_frames_are_fitted_to_the_record_size():
    frames = np.full((2, 4, 6, 3), 200, np.uint8)
    assert fit_frames(frames, 6, 4) is frames
    big = fit_frames(frames, 12, 8)
    assert big.shape == (2, 8, 12, 3) and (big == 200).all()


def test_at_most_max_reprompts_per_phrase_the_farthest_first():
    masker = SAM2VideoMasker(TINY, max_reprompts=2)
    apart = np.array([[1, 0], [1, 1], [1, 0], [0, 0]], bool)
    iou = np.array([[0.3, 0.0], [0.1, 0.4], [0.2, 0.0], [0.0, 0.9]])
    np.testing.assert_array_equal(masker._worst(apart, iou), [[0, 0], [1, 1], [1, 0], [0, 0]])
    with pytest.raises(ValueError, match="max_reprompts"):
        SAM2VideoMasker(TINY, max_reprompts=0)


def test_an_auto_masker_follows_grove_and_a_pinned_one_stays():
    auto, pinned = SAM2FrameMasker(TINY, device="auto"), SAM2FrameMasker(TINY, device="cpu")
    auto.follow("meta")
    pinned.follow("meta")
    assert auto.device == torch.device("meta") and pinned.device == torch.device("cpu")


def test_sam_frame_mode_equals_segment_anythings_own_predictor():
    from segment_anything import SamPredictor

    frames, boxes, keep, scores = _clip(n=3, h=64, w=64)  # SAM's input size: no resize on either side
    masker = SAMFrameMasker(TINY_SAM, device="cpu", frames_per_batch=2)
    answer = masker(frames, boxes, keep, scores)
    predictor = SamPredictor(masker.model)
    for f in range(3):
        predictor.set_image(frames[f])
        phrases = np.flatnonzero(keep[f])
        want, _, _ = predictor.predict_torch(None, None, torch.from_numpy(boxes[f, phrases]), multimask_output=False)
        got = decode_masks([answer[f][p] for p in phrases])
        assert 0 < got.mean() < 1
        np.testing.assert_array_equal(got, want[:, 0].numpy())
    with pytest.raises(ValueError, match="model.masks.encoder must be one of"):
        SAMFrameMasker("vit_x", device="cpu").model
