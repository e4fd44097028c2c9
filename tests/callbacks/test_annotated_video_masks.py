"""The annotated MP4 of ``predict`` draws each box's mask where the predictions carry one."""
from core.drawing import MASK_ALPHA, PALETTE

from types import SimpleNamespace

import numpy as np

from callbacks.annotated_video import ClipPrediction, render_annotated_video
from formats.mask_rle import encode_masks
from formats.video_reader import PyAVVideoSource
from formats.video_writer import write_video

W, H, GREY = 160, 120, 40


def _clip(prediction):
    record = SimpleNamespace(frame_indices=np.arange(0, 10, 2), clip_start_frame=0, clip_end_frame=9)
    return [ClipPrediction(record, prediction)]


def _prediction(masks):
    frames = []
    for f in range(0, 10, 2):
        entry = {"frame": f, "boxes": [[30, 30, 110, 100]], "labels": ["a cup"], "scores": [0.9]}
        if masks is not None:
            entry["masks"] = masks
        frames.append(entry)
    return {"caption": "a cup", "tagged_caption": "<p>a cup</p>", "phrases": ["a cup"], "frames": frames}


def _render(tmp_path, name, prediction):
    video = write_video(tmp_path / "v.mp4", np.full((10, H, W, 3), GREY, np.uint8), fps=10)
    with PyAVVideoSource(video) as source:
        out = render_annotated_video(source, tmp_path / name, _clip(prediction), 0, 9, 10.0)
    with PyAVVideoSource(out) as rendered:
        return out, rendered.read_frames(range(10)).astype(float)


def test_masks_are_drawn_translucent_in_the_phrase_colour(tmp_path):
    mask = np.zeros((H, W), bool)
    mask[50:90, 50:90] = True  # inside the box, clear of its outline and label
    _, frames = _render(tmp_path, "masked.mp4", _prediction(encode_masks(mask)))
    expected = (np.array(PALETTE[0]) * MASK_ALPHA + GREY * (255 - MASK_ALPHA)) / 255
    inside = frames[:, 60:80, 60:80].mean((1, 2))  # (frames, 3)
    assert np.abs(inside - expected).max() < 12, (inside, expected)
    outside = frames[:, 40:46, 40:46].mean((1, 2))  # in the box, off the mask
    assert np.abs(outside - GREY).max() < 12, outside


def test_a_frame_without_masks_is_drawn_as_before(tmp_path):
    plain, _ = _render(tmp_path, "plain.mp4", _prediction(None))
    nulls, _ = _render(tmp_path, "nulls.mp4", _prediction([None]))
    assert plain.read_bytes() == nulls.read_bytes()
