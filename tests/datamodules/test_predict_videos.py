"""Predicting on the user's own videos: listing, clip planning, preprocessing, and the CLI end to end."""
import json
from pathlib import Path

import numpy as np
import pytest

from datamodules.video_folder import VideoFolderDataset, VideoInfo, clip_records, list_videos, plan_clips, video_ids
from formats.frame_grids import annotation_grid
from formats.records import GroundedRecord
from formats.video_reader import PyAVVideoSource
from formats.video_writer import write_video
from models.grove.frame_sampling import centre_frames
from tests.fixtures.tiny_cli import tiny_cli_args


def _touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    return path


def test_list_videos_file_folder_glob(tmp_path):
    a, b = _touch(tmp_path / "a.mp4"), _touch(tmp_path / "b.WEBM")
    _touch(tmp_path / "notes.txt")
    c = _touch(tmp_path / "sub" / "c.mp4")
    assert list_videos(tmp_path) == [a, b]  # a folder: its video files, not sub-folders or other files
    assert list_videos(str(tmp_path / "**" / "*.mp4")) == [a, c]
    assert list_videos(tmp_path / "notes.txt") == [tmp_path / "notes.txt"]  # named directly: tried anyway
    with pytest.raises(FileNotFoundError, match="data.videos.*missing.mp4"):
        list_videos(tmp_path / "missing.mp4")
    with pytest.raises(FileNotFoundError, match="data.videos: no files"):
        list_videos(str(tmp_path / "*.mkv"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no video files"):
        list_videos(tmp_path / "empty")


def test_video_ids_are_stems_made_unique_by_folder(tmp_path):
    paths = [tmp_path / "x" / "clip.mp4", tmp_path / "y" / "clip.mp4", tmp_path / "z" / "other.mp4"]
    assert video_ids(paths) == ["x__clip", "y__clip", "other"]
    assert video_ids(paths[1:]) == ["clip", "other"]


def test_plan_clips_hand_computed():
    assert plan_clips(10, None) == [(0, 10)]
    assert plan_clips(10, 40) == [(0, 10)]  # shorter than a clip: the whole grid
    assert plan_clips(100, 40) == [(0, 40), (40, 80), (60, 100)]  # tiled, last aligned to the end
    assert plan_clips(80, 40) == [(0, 40), (40, 80)]
    assert plan_clips(100, 40, 30) == [(0, 40), (30, 70), (60, 100)]
    with pytest.raises(ValueError, match="stride"):
        plan_clips(100, 40, 41)


@pytest.mark.parametrize("seed", range(5))
def test_plan_clips_cover_every_grid_frame_with_full_clips(seed):
    rng = np.random.default_rng(seed)
    for _ in range(50):
        n, length = int(rng.integers(1, 400)), int(rng.integers(1, 60))
        stride = int(rng.integers(1, length + 1))
        clips = plan_clips(n, length, stride)
        covered = np.zeros(n, dtype=bool)
        for start, stop in clips:
            assert 0 <= start < stop <= n and stop - start == min(length, n)
            covered[start:stop] = True
        assert covered.all()
        starts = [s for s, _ in clips]
        assert starts == sorted(starts) and all(0 < b - a <= stride for a, b in zip(starts, starts[1:]))


def test_clip_records_lie_on_the_videos_5fps_grid():
    info = VideoInfo(Path("/videos/cook.mp4"), "cook", num_frames=100, fps=30.0, width=640, height=360)
    records = clip_records(info, clip_seconds=2.0)  # 2 s = 10 grid frames at 5 fps
    grid = np.arange(0, 100, 6)  # 17 frames
    assert [r.key for r in records] == ["cook_0", "cook_1"]
    np.testing.assert_array_equal(records[0].frame_indices, grid[:10])
    np.testing.assert_array_equal(records[1].frame_indices, grid[7:])
    assert records[0].clip_end_frame == 59 and records[1].clip_end_frame == 99
    for r in records:  # a valid record by the annotation reader's own checks
        again = GroundedRecord.from_dict(r.to_dict())
        np.testing.assert_array_equal(again.frame_indices, annotation_grid(30.0, r.clip_start_frame, r.clip_end_frame))
        assert (r.width, r.height) == (640, 360)
    whole = clip_records(info, clip_seconds=None)
    assert len(whole) == 1 and whole[0].clip_end_frame == 99 and len(whole[0].bboxes) == 17


def reencode(src: Path, dst: Path, fps_out: float = 30.0, scale: int = 2) -> Path:
    """Re-encode a 25-fps clip at ``fps_out`` and ``scale`` x size (frame j shows the source frame at its time)."""
    with PyAVVideoSource(src) as video:
        frames, fps_in = video.read_all(), video.fps
    n_out = int(round(len(frames) * fps_out / fps_in))
    source_index = np.minimum(np.floor(np.arange(n_out) * fps_in / fps_out + 1e-9).astype(int), len(frames) - 1)
    big = frames[source_index].repeat(scale, axis=1).repeat(scale, axis=2)
    return write_video(dst, big, fps_out)


@pytest.fixture(scope="module")
def video_folder(tiny_synthetic_root, tmp_path_factory):
    """The original 2-s synthetic test clip (128 px, 25 fps), it at 30 fps and 256 px, and a broken file."""
    folder = tmp_path_factory.mktemp("my_videos")
    src = sorted((tiny_synthetic_root / "videos").glob("synthtest*.mp4"))[0]
    (folder / "original.mp4").write_bytes(src.read_bytes())
    reencode(src, folder / "big30.mp4")
    (folder / "broken.mp4").write_bytes(b"this is not a video" * 50)
    return folder


def test_dataset_builds_the_new_grid_and_same_model_inputs(video_folder):
    ds = VideoFolderDataset(video_folder, global_image_size=64, grounding_image_size=128)
    assert [r.key for r in ds.records] == ["big30_0", "original_0"] and len(ds) == 3
    big, orig, broken = ds[0], ds[1], ds[2]
    np.testing.assert_array_equal(big["frame_indices"].numpy(), np.arange(0, 60, 6))  # 30 fps: every 6th
    np.testing.assert_array_equal(orig["frame_indices"].numpy(), np.arange(0, 50, 5))
    assert big["size"].tolist() == [256, 256] and orig["size"].tolist() == [128, 128]
    np.testing.assert_array_equal(big["caption_positions"].numpy(), centre_frames(10, 8))
    # the same instants, preprocessed to the same model input (up to the codec's noise)
    for name in ("global_frames", "grounding_frames"):
        assert big[name].shape == orig[name].shape
        assert (big[name] - orig[name]).abs().mean() < 0.05
    assert "key" not in broken and broken["skipped"][0][0].endswith("broken.mp4")
    assert "cannot open video" in broken["skipped"][0][1]


FIXED_CAPTION = "a <p> red shape </p> [DET] moves next to <p> the wall </p> [DET]"


@pytest.mark.slow
def test_predict_on_reencoded_video_gives_its_own_pixel_coordinates(tiny_synthetic_root, video_folder, tmp_path,
                                                                     monkeypatch, capsys):
    from cli import cli_main
    from models.grove import Grove

    # Fix the caption so both videos are grounded with the same phrases: the box decoder is then a
    # deterministic function of (almost) the same frames, and only the pixel scale may differ.
    monkeypatch.setattr(Grove, "generate_captions",
                        lambda self, frames, max_new_tokens=64, video_embeds=None: [FIXED_CAPTION] * len(frames))
    cli = cli_main(["predict", *tiny_cli_args(tiny_synthetic_root, tmp_path), f"--data.videos={video_folder}",
                    "--model.init_args.objectness_threshold=0.0"])
    run = Path(cli.trainer.log_dir)
    preds = json.loads((run / "predictions_predict.json").read_text())
    assert sorted(preds) == ["big30_0", "original_0"]
    big, orig = preds["big30_0"], preds["original_0"]
    assert big["phrases"] == ["red shape", "the wall"]
    # threshold 0: every phrase on every frame of the new 5-fps grid, inside the 256 x 256 frame
    assert [f["frame"] for f in big["frames"]] == list(range(0, 60, 6))
    assert [f["frame"] for f in orig["frames"]] == list(range(0, 50, 5))
    boxes_big = np.array([f["boxes"] for f in big["frames"]])
    boxes_orig = np.array([f["boxes"] for f in orig["frames"]])
    assert boxes_big.shape == (10, 2, 4)
    assert (boxes_big >= 0).all() and (boxes_big <= 256).all()
    assert (boxes_big[..., 2:] >= boxes_big[..., :2]).all()
    # same normalised boxes, twice the pixels
    np.testing.assert_allclose(boxes_big, 2 * boxes_orig, atol=2.5)
    assert np.abs(boxes_big - 2 * boxes_orig).mean() < 1.0

    # annotated MP4s: decodable, the input's frame count, size and rate
    for name, frames, size, fps in (("big30", 60, 256, 30.0), ("original", 50, 128, 25.0)):
        with PyAVVideoSource(run / "annotated" / f"{name}.mp4") as video:
            assert (video.num_frames, video.width, video.height) == (frames, size, size)
            assert video.fps == pytest.approx(fps)
            decoded = video.read_all()
        assert decoded.shape == (frames, size, size, 3)
        with PyAVVideoSource(video_folder / f"{name}.mp4") as video:
            plain = video.read_all()
        assert np.abs(decoded.astype(int) - plain).max() > 100  # something was drawn on it
    assert not (run / "annotated" / "broken.mp4").exists()
    listing = capsys.readouterr().out
    assert "Skipped 1 video(s)" in listing and "broken.mp4: VideoDecodeError" in listing
    assert "Annotated videos: 2 written" in listing
