"""The entity-coloured MP4: entity k keeps palette colour k in every clip, gaps keep the length."""
from core.drawing import LABEL_ALPHA, MASK_ALPHA, PALETTE

import numpy as np

from formats.mask_rle import encode_masks
from formats.video_reader import PyAVVideoSource
from formats.video_writer import write_video
from longvideo.render import entity_colours, render_timeline_video


def timeline_for(path, n, fps=10.0):
    tube = lambda box: [{"frame": f, "time_s": f / fps, "box": box, "score": 0.9} for f in range(0, n, 2)]  # noqa: E731
    return {"video_id": "v", "path": str(path), "fps": fps, "num_frames": n, "width": 640, "height": 360,
            "segments": [{"key": "v_0", "start_frame": 0, "end_frame": n // 2 - 1, "caption": "A cup and a knife."},
                         {"key": "v_1", "start_frame": n // 2, "end_frame": n - 1, "caption": "The knife."}],
            "gaps": [], "entities": [{"id": 0, "name": "a cup", "tube": tube([100, 100, 300, 250])},
                                     {"id": 3, "name": "a knife", "tube": tube([400, 120, 600, 300])}]}


def test_each_entity_keeps_its_palette_colour_through_the_video(tmp_path):
    video = write_video(tmp_path / "v.mp4", np.full((20, 360, 640, 3), 40, np.uint8), fps=10)
    timeline = timeline_for(video, 20)
    assert entity_colours(timeline) == {"#0 a cup": PALETTE[0], "#3 a knife": PALETTE[3]}
    out = render_timeline_video(timeline, tmp_path / "out.mp4")
    with PyAVVideoSource(out) as rendered:
        assert rendered.num_frames == 20
        frames = rendered.read_frames([0, 5, 15, 19]).astype(float)
    for entity, (x1, y1) in ((0, (100, 100)), (3, (400, 120))):
        # the label's fill just above the box's top-left corner: the colour blended over the grey
        expected = (np.array(PALETTE[entity]) * LABEL_ALPHA + 40 * (255 - LABEL_ALPHA)) / 255
        patch = frames[:, y1 - 2, x1 + 2:x1 + 8].mean(1)  # (frames, 3)
        assert np.abs(patch - expected).max() < 30, (entity, patch, expected)


def test_a_gap_keeps_the_frame_count(tmp_path):
    rng = np.random.default_rng(0)
    video = write_video(tmp_path / "v.mp4", rng.integers(0, 255, (100, 360, 640, 3), dtype=np.uint8), fps=10, gop=10)
    data = bytearray(video.read_bytes())
    start, length = int(len(data) * 0.45), int(len(data) * 0.1)
    data[start:start + length] = rng.integers(0, 255, length, dtype=np.uint8).tobytes()
    (tmp_path / "bad.mp4").write_bytes(bytes(data))
    timeline = timeline_for(tmp_path / "bad.mp4", 100)
    out = render_timeline_video(timeline, tmp_path / "out.mp4")
    with PyAVVideoSource(out) as rendered:
        assert rendered.num_frames == 100


def test_each_entity_s_masks_are_drawn_in_its_colour(tmp_path):
    video = write_video(tmp_path / "v.mp4", np.full((20, 360, 640, 3), 40, np.uint8), fps=10)
    timeline = timeline_for(video, 20)
    cup, knife = np.zeros((360, 640), bool), np.zeros((360, 640), bool)
    cup[140:230, 130:270] = True  # inside each box, clear of its outline and label
    knife[160:280, 430:570] = True
    for entity, mask in zip(timeline["entities"], (cup, knife)):
        for k, point in enumerate(entity["tube"]):
            if k % 2 == 0:  # every other grid frame (0, 4, 8, ...) carries a mask
                point["mask"] = encode_masks(mask)[0]
    out = render_timeline_video(timeline, tmp_path / "out.mp4")
    with PyAVVideoSource(out) as rendered:
        frames = rendered.read_frames(range(20)).astype(float)
    for entity, (y, x) in ((0, (185, 200)), (3, (220, 500))):
        blend = (np.array(PALETTE[entity]) * MASK_ALPHA + 40 * (255 - MASK_ALPHA)) / 255
        inside = frames[:, y - 10:y + 10, x - 10:x + 10].mean((1, 2))  # (frames, 3)
        with_mask = (np.arange(20) // 2) % 2 == 0  # a grid frame's mask holds until the next grid frame
        assert np.abs(inside[with_mask] - blend).max() < 12, (entity, inside[with_mask], blend)
        assert np.abs(inside[~with_mask] - 40).max() < 12, (entity, inside[~with_mask])
    outside = frames[:, 120:128, 110:118].mean((1, 2))  # in the cup's box, off its mask
    assert np.abs(outside - 40).max() < 12
