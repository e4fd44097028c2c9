"""GroundedClipDataset.decode_span: one decode of a clip's span gives decode_frames' RGB frames at the
positions asked and every frame as the writer's YUV planes, from a video file and from a frame folder."""
from core.yuv_compositing import YuvFrame

import numpy as np
from PIL import Image

from datamodules.grounded_dataset import GroundedClipDataset
from formats.records import GroundedRecord
from formats.video_reader import PyAVVideoSource
from formats.video_writer import write_video
from formats.yuv_frames import RgbToYuv

W, H, FPS, N = 48, 32, 25.0, 30


def _record(video_fname: str) -> GroundedRecord:
    grid = list(range(0, N, 5))
    return GroundedRecord.from_dict({
        "video_fname": video_fname, "video_id": "v", "clip_id": "0", "fps": FPS, "clip_start_frame": 0,
        "clip_end_frame": N - 1, "width": W, "height": H, "caption": "a cat", "tagged_caption": "<p>a cat</p>",
        "phrases": ["a cat"], "bboxes": [[[1, 1, 9, 9]]] * len(grid), "labels": [["a cat"]] * len(grid)})


def test_a_span_decoded_once_from_a_video_file_and_from_a_frame_folder(tmp_path):
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (N, H, W, 3), dtype=np.uint8)
    write_video(tmp_path / "v.mp4", frames, FPS)
    (tmp_path / "f").mkdir()
    for i, frame in enumerate(frames):
        Image.fromarray(frame).save(tmp_path / "f" / f"{i + 1:06d}.png")
    span, positions = np.arange(3, 27), np.array([0, 5, 5, 23, 11])
    for name in ("v.mp4", "f"):
        dataset = GroundedClipDataset([_record(name)], tmp_path, num_frames=4, global_image_size=16,
                                      grounding_image_size=16, train=False)
        record = dataset.records[0]
        rgb, yuv = dataset.decode_span(record, span, positions)
        assert np.array_equal(rgb, dataset.decode_frames(record, span[positions]))
        assert len(yuv) == len(span) and all(isinstance(f, YuvFrame) and f.subsampled for f in yuv)
        if name == "v.mp4":  # the decoder's own planes
            with PyAVVideoSource(tmp_path / name) as video:
                expected = video.read_frame_list(span.tolist(), colour="yuv")
        else:  # the folder's RGB frames converted as the H.264 writer converts RGB
            expected = [RgbToYuv(W, H)(f) for f in frames[span]]
        for got, want in zip(yuv, expected):
            assert all(np.array_equal(getattr(got, p), getattr(want, p)) for p in "yuv") and got.tags == want.tags
