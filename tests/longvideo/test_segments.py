"""Cutting streamed videos into clips: on the grid (as ``cli.py predict`` cuts them) and at shot cuts."""
import numpy as np
import pytest

from datamodules.video_folder import plan_clips
from formats.frame_grids import annotation_grid
from formats.video_writer import write_video
from longvideo.datamodule import LongVideoClips
from longvideo.segments import ClipPlanner

SIZES = dict(num_frames=4, global_image_size=32, grounding_image_size=32)


def planned(n, clip_frames, cuts=(), gaps=()):
    """Clips (as lists of grid positions) of ``n`` grid frames; a cut or a gap before the listed positions."""
    cut_at = set(cuts)
    planner = ClipPlanner(clip_frames, cut=(lambda pixels: int(pixels) in cut_at) if cuts else None)
    clips = []
    for i in range(n):
        if i in gaps:
            clips += planner.gap()
            continue
        clips += planner.push(i, np.int64(i))
    clips += planner.close()
    return [c.frames.tolist() for c in clips], [c.shot for c in clips]


@pytest.mark.parametrize("seed", range(3))
def test_grid_mode_cuts_as_plan_clips_does(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        n, length = int(rng.integers(1, 200)), int(rng.integers(1, 50))
        clips, shots = planned(n, length)
        assert clips == [list(range(a, b)) for a, b in plan_clips(n, length)]
        assert set(shots) == {0}
    assert planned(7, None)[0] == [list(range(7))]  # no clip length: the whole video


def test_a_cut_closes_the_run_and_no_clip_straddles_it():
    clips, shots = planned(25, 10, cuts=[12])
    assert clips == [list(range(0, 10)), list(range(2, 12)), list(range(12, 22)), list(range(15, 25))]
    assert shots == [0, 0, 1, 1]
    clips, shots = planned(14, 10, cuts=[3])  # a shot shorter than a clip is one clip
    assert clips == [[0, 1, 2], list(range(3, 13)), list(range(4, 14))]


def test_a_decoding_gap_ends_the_run_before_it_and_starts_a_new_shot():
    clips, shots = planned(30, 10, gaps={12, 13, 14})
    assert clips == [list(range(0, 10)), list(range(2, 12)), list(range(15, 25)), list(range(20, 30))]
    assert shots == [0, 0, 1, 1]


def scene(rng, n, h=72, w=128):
    """A shot: a random coloured texture with a small square moving over it."""
    base = rng.integers(0, 255, (h // 8, w // 8, 3), dtype=np.uint8).repeat(8, 0).repeat(8, 1)
    frames = np.repeat(base[None], n, axis=0)
    for i in range(n):
        x = (2 * i) % (w - 12)
        frames[i, 30:42, x:x + 12] = 255
    return frames


def test_shot_mode_finds_hand_made_cuts_on_the_grid(tmp_path):
    rng = np.random.default_rng(0)
    cuts = [90, 210]  # frames where a new shot starts (30 fps: grid step 6)
    frames = np.concatenate([scene(rng, 90), scene(rng, 120), scene(rng, 60)])
    path = write_video(tmp_path / "shots.mp4", frames, fps=30)
    data = LongVideoClips(path, clip_seconds=2.0, segmenter="shots", **SIZES)
    samples = list(data)
    clips = [e for s in samples for e in s["long_video"] if e["kind"] == "clip"]
    end = [e for s in samples for e in s["long_video"] if e["kind"] == "end"][0]
    assert end["cuts"] == cuts
    bounds = [0, *cuts, 270]
    for clip in clips:
        shot = clip["shot"]
        assert bounds[shot] <= clip["frames"][0] and clip["frames"][-1] < bounds[shot + 1]  # never straddles
        assert len(clip["frames"]) == 10
    grid = annotation_grid(30, 0, 269)
    covered = sorted({f for c in clips for f in c["frames"]})
    assert covered == grid.tolist()
    # per shot, tiled then end-aligned: shot 0 has grid frames 0..84 (15): clips from 0 and from 30
    assert [c["frames"][0] for c in clips if c["shot"] == 0] == [0, 30]
    grid_mode = [e for s in LongVideoClips(path, clip_seconds=2.0, **SIZES) for e in s["long_video"]
                 if e["kind"] == "clip"]
    assert [c["frames"][0] for c in grid_mode] == [a * 6 for a, _ in plan_clips(45, 10)]


def test_short_video_is_one_clip_and_an_empty_file_is_reported(tmp_path):
    rng = np.random.default_rng(1)
    short = write_video(tmp_path / "short.mp4", scene(rng, 20), fps=10)  # 2 s, clips of 8 s
    (tmp_path / "empty.mp4").write_bytes(b"")
    data = LongVideoClips(tmp_path, clip_seconds=8.0, **SIZES)
    samples = list(data)
    clips = [s for s in samples if "key" in s]
    assert [s["key"] for s in clips] == ["short_0"]
    assert clips[0]["frame_indices"].tolist() == list(range(0, 20, 2))
    assert clips[0]["grounding_frames"].shape == (10, 3, 32, 32)
    unreadable = [e for s in samples for e in s["long_video"] if e["kind"] == "unreadable"]
    assert len(unreadable) == 1 and "empty.mp4" in unreadable[0]["path"]
    assert short.exists()


def test_bad_settings_are_named(tmp_path):
    from longvideo.datamodule import LongVideoDataModule

    video = write_video(tmp_path / "v.mp4", scene(np.random.default_rng(2), 10), fps=10)
    with pytest.raises(ValueError, match="data.init_args.video_clip_stride_seconds"):
        LongVideoDataModule(videos=str(video), video_clip_stride_seconds=4.0).make_video_dataset()
    with pytest.raises(ValueError, match="data.init_args.segmenter must be one of"):
        LongVideoDataModule(videos=str(video), segmenter="scenes")
