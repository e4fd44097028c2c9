"""Result assembly: clips from the predict path's outputs, the coloured caption, one frame with its boxes."""
from core.drawing import MASK_ALPHA, PALETTE

import numpy as np
import pytest

from datamodules.video_folder import VideoInfo, clip_records
from formats.mask_rle import encode_masks
from webdemo.results import (
    ClipResult,
    assemble_clips,
    caption_html,
    clip_label,
    draw_frame,
    frame_boxes,
    frame_masks,
)


def _hex(colour):
    return "#%02x%02x%02x" % colour


def test_caption_html_colours_each_phrase_and_escapes_the_text():
    prediction = {"tagged_caption": "<p> a red circle </p> [DET] passes <p>the wall</p> [DET] & "
                                    "<p>a red circle</p> [DET] <script>",
                  "phrases": ["a red circle", "the wall", "a red circle"]}
    out = caption_html(prediction)
    assert out.count('class="grove-phrase"') == 3
    assert out.count(f"background-color:{_hex(PALETTE[0])}") == 2  # the repeated phrase keeps its colour
    assert out.count(f"background-color:{_hex(PALETTE[1])}") == 1
    assert "[DET]" not in out and "<script>" not in out and "&amp;" in out and "&lt;script&gt;" in out
    # the text reads as the caption
    import re
    text = re.sub(r"<[^>]+>", "", out)
    assert " ".join(text.split()) == "a red circle passes the wall &amp; a red circle &lt;script&gt;"


def test_caption_html_ink_contrasts_with_the_phrase_colour():
    yellow, navy = (255, 225, 25), (128, 0, 0)
    assert PALETTE.index(yellow) == 8 and PALETTE.index(navy) == 11
    phrases = [f"p{i}" for i in range(12)]
    out = caption_html({"tagged_caption": " ".join(f"<p>{p}</p>" for p in phrases), "phrases": phrases})
    assert f"background-color:{_hex(yellow)};color:#000000" in out  # dark text on a light colour
    assert f"background-color:{_hex(navy)};color:#ffffff" in out


def test_caption_html_without_a_prediction():
    assert "No caption" in caption_html(None)


def test_clips_follow_the_records_and_name_what_was_skipped():
    info = VideoInfo(path=__import__("pathlib").Path("/videos/cooking.mp4"), video_id="cooking", num_frames=500,
                     fps=25.0, width=64, height=48)
    records = clip_records(info, clip_seconds=8.0)  # 20 s: 0-8, 8-16, and one aligned to the end
    assert [r.key for r in records] == ["cooking_0", "cooking_1", "cooking_2"]
    predictions = {"cooking_0": {"caption": "a cup", "phrases": [], "frames": []},
                   "cooking_2": {"caption": "a knife", "phrases": [], "frames": []}}
    clips = assemble_clips(records, predictions, {"cooking_0": {"frames": [0], "scores": [[]]}},
                           {"cooking_1": "decoding failed"})
    assert [c.key for c in clips] == ["cooking_0", "cooking_1", "cooking_2"]
    assert clips[0].prediction is predictions["cooking_0"] and clips[0].skipped is None
    assert clips[0].objectness == {"frames": [0], "scores": [[]]} and clips[2].objectness is None
    assert clips[1].prediction is None and clips[1].skipped == "decoding failed"
    assert clips[0].grid == list(range(0, 200, 5)) and clips[2].grid == list(range(300, 500, 5))
    assert clip_label(2, clips[2], 25.0) == "clip 3 · 12.0-20.0 s · a knife"
    assert clip_label(1, clips[1], 25.0) == "clip 2 · 8.0-16.0 s · not predicted: decoding failed"


PREDICTION = {"caption": "a cup and a knife", "phrases": ["a cup", "a knife"],
              "frames": [{"frame": 10, "boxes": [[4.0, 6.0, 20.0, 30.0], [30.0, 2.0, 60.0, 40.0]],
                          "labels": ["a cup", "a knife"], "scores": [0.9, 0.6]},
                         {"frame": 15, "boxes": [[5.0, 5.0, 9.0, 9.0]], "labels": ["a knife"], "scores": [0.7]}]}


def test_frame_boxes_are_those_of_the_frame_asked():
    boxes, labels, scores = frame_boxes(PREDICTION, 15)
    np.testing.assert_array_equal(boxes, [[5.0, 5.0, 9.0, 9.0]])
    assert labels == ["a knife"] and scores == [0.7]
    boxes, labels, scores = frame_boxes(PREDICTION, 20)
    assert boxes.shape == (0, 4) and labels == [] and scores == []


@pytest.mark.parametrize("seed", range(2))
def test_draw_frame_outlines_each_kept_box_in_its_phrase_colour(seed):
    image = np.random.default_rng(seed).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    drawn = draw_frame(image, PREDICTION, 10)
    assert drawn.shape == image.shape
    assert drawn[29, 12].tolist() == list(PALETTE[0])  # bottom edge of the cup's box (opaque outline)
    assert drawn[39, 45].tolist() == list(PALETTE[1])  # bottom edge of the knife's box
    assert (drawn[20, 10] == image[20, 10]).all()  # inside the cup's box: untouched
    np.testing.assert_array_equal(draw_frame(image, PREDICTION, 20), image)  # nothing kept there
    np.testing.assert_array_equal(draw_frame(image, None, 10), image)


def test_clip_result_defaults():
    clip = ClipResult("v_0", 0, 39, [0, 5], None)
    assert clip.objectness is None and clip.judge is None and clip.skipped is None


def test_draw_frame_fills_each_mask_in_its_phrase_colour():
    image = np.random.default_rng(0).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    knife = np.zeros((48, 64), bool)
    knife[10:35, 35:55] = True  # inside the knife's box, clear of its outline
    frame = {**PREDICTION["frames"][0], "masks": [None, encode_masks(knife)[0]]}
    prediction = {**PREDICTION, "frames": [frame, PREDICTION["frames"][1]]}
    masks = frame_masks(prediction, 10)
    assert masks[0] is None and (masks[1] == knife).all()
    assert frame_masks(PREDICTION, 10) is None and frame_masks(prediction, 15) is None
    drawn = draw_frame(image, prediction, 10).astype(int)
    expected = np.round((np.array(PALETTE[1]) * MASK_ALPHA + image[20, 45].astype(int) * (255 - MASK_ALPHA)) / 255)
    np.testing.assert_array_equal(drawn[20, 45], expected)  # inside the mask: the translucent blend
    assert drawn[34, 45].tolist() == list(PALETTE[1])  # its bottom contour: opaque
    assert (drawn[20, 10] == image[20, 10]).all()  # the cup has no mask: its box's inside is untouched
    assert (drawn[38, 45] == image[38, 45]).all()  # in the knife's box, below the mask
    np.testing.assert_array_equal(draw_frame(image, prediction, 15), draw_frame(image, PREDICTION, 15))
