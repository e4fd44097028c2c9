"""The annotated MP4's frames are the straightforward drawing's: every source frame read by index,
one overlay laid out from scratch per grid frame, blended over the whole frame in its YUV planes,
encoded alike."""
from core.drawing import caption_band, composite, render_overlay
from core.yuv_compositing import rgb_to_yuv

from types import SimpleNamespace

import numpy as np
import pytest

from callbacks.annotated_video import DEFAULT_PRESET, ClipPrediction, grid_owners, render_annotated_video
from formats.video_reader import PyAVVideoSource
from formats.video_writer import VideoWriter, write_video

W, H, FPS, N = 160, 96, 10, 30
CAPTION = "A man in a red shirt walks past a dog and a bicycle on the street while a woman watches them"


def _clips():
    clips = []
    for c, (start, end) in enumerate([(0, 19), (10, 29)]):
        grid = np.arange(start, end + 1, 2)
        boxes = lambda g: [[5 + g, 8, 60 + g, 50], [90, 20 + c, 150, 70]]  # noqa: E731
        frames = [{"frame": int(g), "boxes": boxes(int(g)), "labels": ["a man", "a dog"]} for g in grid]
        prediction = {"caption": f"{CAPTION} ({c})", "phrases": ["a man", "a dog"], "frames": frames}
        clips.append(ClipPrediction(SimpleNamespace(frame_indices=grid, clip_start_frame=start, clip_end_frame=end),
                                    prediction))
    return clips


def _blend_whole_frame(frames, overlay):
    alpha = overlay[..., 3:4].astype(np.uint16)
    blended = (frames.astype(np.uint16) * (255 - alpha) + overlay[..., :3].astype(np.uint16) * alpha + 127) // 255
    return blended.astype(np.uint8)


def _blend_whole_frame_yuv(frame, overlay):
    """Every sample of every plane blended: luma and 4:4:4 chroma per pixel, 4:2:0 chroma with the
    overlay's sums over each 2x2 block (reshaped, not gathered)."""
    h, w = frame.y.shape
    alpha = overlay[..., 3].astype(np.int64)
    colour = np.rint(rgb_to_yuv(overlay[..., :3], frame.colorspace, frame.color_range))
    colour = np.clip(colour, 0, 255).astype(np.int64)
    planes = [(frame.y.astype(np.int64) * (255 - alpha) + colour[..., 0] * alpha + 127) // 255]
    for c, plane in ((1, frame.u), (2, frame.v)):
        if plane.shape == (h, w):
            planes.append((plane.astype(np.int64) * (255 - alpha) + colour[..., c] * alpha + 127) // 255)
        else:
            total = alpha.reshape(h // 2, 2, w // 2, 2).sum(axis=(1, 3))
            paint = (colour[..., c] * alpha).reshape(h // 2, 2, w // 2, 2).sum(axis=(1, 3))
            planes.append((plane.astype(np.int64) * (1020 - total) + paint + 510) // 1020)
    return [p.astype(np.uint8) for p in planes]


def _straightforward(source, clips, out, width, height):
    """Each frame read by index, its overlay drawn with a fresh caption layout, blended everywhere."""
    from core.drawing import phrase_colours

    grid, owner = grid_owners(clips)
    writer = VideoWriter(out, FPS, width, height, crf=20, preset=DEFAULT_PRESET)
    for index in range(N):
        frame = source.read_frame_list([index], colour="yuv")[0]
        slot = max(int(np.searchsorted(grid, index, side="right")) - 1, 0)
        clip = clips[int(owner[slot])]
        entry = next(f for f in clip.prediction["frames"] if f["frame"] == int(grid[slot]))
        caption_band.cache_clear()
        overlay = render_overlay(width, height, np.asarray(entry["boxes"], float), entry["labels"],
                                 phrase_colours(clip.prediction["phrases"]), clip.prediction["caption"])
        y, u, v = _blend_whole_frame_yuv(frame, overlay)
        writer.write_yuv(y[None], u[None], v[None], frame.tags)
    return writer.close()


@pytest.mark.parametrize("width,height", [(W, H), (W + 1, H - 1)])  # 4:2:0, and 4:4:4 at an odd size
def test_annotated_frames_equal_the_straightforward_drawing(tmp_path, width, height):
    rng = np.random.default_rng(0)
    video = write_video(tmp_path / "v.mp4", rng.integers(0, 256, (N, height, width, 3), dtype=np.uint8), fps=FPS)
    clips = _clips()
    with PyAVVideoSource(video) as source:
        ours = render_annotated_video(source, tmp_path / "ours.mp4", clips, 0, N - 1, FPS, chunk_frames=7)
        reference = _straightforward(source, clips, tmp_path / "reference.mp4", width, height)
    with PyAVVideoSource(ours) as a, PyAVVideoSource(reference) as b:
        assert (a.width, a.height) == (width, height)
        assert np.array_equal(a.read_all(), b.read_all())
    assert ours.read_bytes() == reference.read_bytes()  # same encoder settings: the same file


def test_compositing_only_the_covered_pixels_equals_blending_everywhere():
    rng = np.random.default_rng(1)
    frames = rng.integers(0, 256, (3, 40, 50, 3), dtype=np.uint8)
    overlay = np.zeros((40, 50, 4), np.uint8)
    overlay[2:6, 10:20] = rng.integers(0, 256, (4, 10, 4))
    overlay[20:40, :, :3] = 7
    overlay[20:40, :, 3] = 160
    overlay[30, 49, 3] = 0
    overlay[5, 3] = (200, 10, 90, 255)  # an opaque pixel alone: the overlay's colour exactly
    assert np.array_equal(composite(frames, overlay), _blend_whole_frame(frames, overlay))
    assert (composite(frames, overlay)[:, 5, 3] == (200, 10, 90)).all()
    for _ in range(5):  # random overlays, random coverage and transparency
        random_overlay = rng.integers(0, 256, (40, 50, 4), dtype=np.uint8)
        random_overlay[..., 3] *= rng.random((40, 50)) < rng.random()
        assert np.array_equal(composite(frames, random_overlay), _blend_whole_frame(frames, random_overlay))
    assert np.array_equal(composite(frames, np.zeros_like(overlay)), frames)
    sparse = overlay.copy()
    sparse[20:] = 0  # the small rectangle alone: blended there only
    assert np.array_equal(composite(frames, sparse), _blend_whole_frame(frames, sparse))


def _drive(callback, dataset, predictions):
    """One predict epoch of ``callback``: a batch per clip, in the dataset's order."""
    trainer = SimpleNamespace(world_size=1, is_global_zero=True, predict_dataloaders=[SimpleNamespace(dataset=dataset)],
                              progress_bar_callback=None, callbacks=[])
    callback.on_predict_epoch_start(trainer, None)
    queued = []
    for index, record in enumerate(dataset.records):
        callback.on_predict_batch_end(trainer, None, {"predictions": {record.key: predictions[record.key]}}, {}, index)
        queued.append(sorted(callback._futures))
    callback.on_predict_epoch_end(trainer, None)
    return queued


def test_the_writer_thread_renders_a_video_once_its_clips_are_predicted_and_writes_the_same_files(tmp_path):
    from callbacks.annotated_video_writer import AnnotatedVideoWriter

    rng = np.random.default_rng(2)
    clips = _clips()
    records, predictions = [], {}
    for name in ("first", "second"):
        write_video(tmp_path / f"{name}.mp4", rng.integers(0, 256, (N, H, W, 3), dtype=np.uint8), fps=FPS)
        for c, clip in enumerate(clips):
            r = clip.record
            records.append(SimpleNamespace(key=f"{name}_{c}", video_fname=f"{name}.mp4", video_id=name, fps=FPS,
                                           extra={}, frame_indices=r.frame_indices, clip_start_frame=r.clip_start_frame,
                                           clip_end_frame=r.clip_end_frame))
            predictions[f"{name}_{c}"] = clip.prediction
    dataset = SimpleNamespace(records=records, video_root=tmp_path)
    behind = AnnotatedVideoWriter(output_dir=str(tmp_path / "behind"), only_videos=False)
    queued = _drive(behind, dataset, predictions)
    assert queued == [[], ["first.mp4"], ["first.mp4"], ["first.mp4", "second.mp4"]]
    at_end = AnnotatedVideoWriter(output_dir=str(tmp_path / "at_end"), only_videos=False, background=False)
    assert _drive(at_end, dataset, predictions) == [[], [], [], []]
    for name in ("first", "second"):
        written = tmp_path / "behind" / "annotated" / f"{name}.mp4"
        assert written.read_bytes() == (tmp_path / "at_end" / "annotated" / f"{name}.mp4").read_bytes()
    assert [p.name for p in behind.written] == ["first.mp4", "second.mp4"]
