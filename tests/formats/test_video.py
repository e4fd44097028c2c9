"""Video access: decoded frames are the written ones, sparse reads equal a full decode, bad files fail clearly."""
from fractions import Fraction

import av
import numpy as np
import pytest
from PIL import Image

from formats.frame_folder import FrameFolderSource
from formats.video_files import open_video
from formats.video_reader import PyAVVideoSource, VideoDecodeError
from formats.video_writer import VideoWriter, write_video

NUM_FRAMES, HEIGHT, WIDTH, FPS = 60, 48, 64, 25
BLOCK = 8  # marker blocks large enough to survive compression


def marked_frames(num_frames=NUM_FRAMES, height=HEIGHT, width=WIDTH, seed=0):
    """Smooth random frames whose top row of 8x8 blocks spells the frame index in binary."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(60, 190, size=(num_frames, 1, 1, 3))
    yy, xx = np.mgrid[0:height, 0:width]
    wave = 25 * np.sin(xx[None] / rng.uniform(5, 15, (num_frames, 1, 1)) + yy[None] / 9.0)
    frames = base + wave[..., None]
    bits = (np.arange(num_frames)[:, None] >> np.arange(-(-width // BLOCK))[None]) & 1  # (N, blocks)
    marker = np.repeat(bits, BLOCK, axis=1)[:, None, :width] * 255.0  # (N, 1, W)
    frames[:, :BLOCK] = marker[..., None]
    return np.clip(frames, 0, 255).astype(np.uint8)


def decode_marker(frames):
    centres = frames[:, BLOCK // 2, BLOCK // 2::BLOCK].mean(-1) > 127  # (N, blocks)
    return (centres * (1 << np.arange(centres.shape[1]))).sum(1)


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    frames = marked_frames()
    path = write_video(tmp_path_factory.mktemp("video") / "clip.mp4", frames, FPS, gop=10)
    return path, frames


def test_decoded_frames_equal_written(video):
    path, drawn = video
    with PyAVVideoSource(path) as src:
        assert (src.num_frames, src.fps, src.width, src.height) == (NUM_FRAMES, FPS, WIDTH, HEIGHT)
        decoded = src.read_all()
    assert decoded.shape == drawn.shape and decoded.dtype == np.uint8
    assert np.abs(decoded.astype(float) - drawn).mean() < 3.0
    # each decoded frame is nearest to its own drawn frame, and carries its own index
    dist = ((decoded[:, None].astype(float) - drawn[None].astype(float)) ** 2).mean((2, 3, 4))
    np.testing.assert_array_equal(dist.argmin(1), np.arange(NUM_FRAMES))
    np.testing.assert_array_equal(decode_marker(decoded), np.arange(NUM_FRAMES))


def test_random_subsets_equal_full_decode(video):
    path, _ = video
    rng = np.random.default_rng(1)
    with PyAVVideoSource(path) as src:
        full = src.read_all()
        cases = [[NUM_FRAMES - 1], [NUM_FRAMES, NUM_FRAMES + 1, 0], [5, 5, 5], [59, 0, 30, 29, 31, 9, 10, 11]]
        cases += [rng.integers(0, NUM_FRAMES + 2, size=rng.integers(1, 12)).tolist() for _ in range(25)]
        for indices in cases:
            got = src.read_frames(indices)
            expected = full[np.minimum(indices, NUM_FRAMES - 1)]
            np.testing.assert_array_equal(got, expected, err_msg=str(indices))
        assert src.read_frames([]).shape == (0, HEIGHT, WIDTH, 3)
        with pytest.raises(IndexError):
            src.read_frames([-1])


def test_sparse_read_decodes_only_the_needed_gops(video):
    path, _ = video
    src = PyAVVideoSource(path)
    decoded = []
    original = src._decode_from

    def counting(target):
        for item in original(target):
            decoded.append(item[0])
            yield item

    src._decode_from = counting
    src.read_frames([NUM_FRAMES - 1])
    assert len(decoded) <= 12  # one GOP (10 frames) plus B-frame slack, not 60 frames
    decoded.clear()
    src.read_frames([2, 55])  # far apart: seeks instead of decoding through the middle
    assert len(decoded) <= 2 * 12
    src.close()


def _write_with_offset(path, frames, start_pts, fps=FPS, options=None):
    """A stream whose first timestamp is not 0 (as cut or remuxed videos have)."""
    with av.open(str(path), "w", options=options or {}) as container:
        stream = container.add_stream("libx264", rate=Fraction(fps))
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        stream.codec_context.gop_size = 10
        for i, array in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(array, format="rgb24")
            frame.pts = start_pts + i
            container.mux(stream.encode(frame))
        container.mux(stream.encode())


@pytest.mark.parametrize("suffix", [".mp4", ".mkv"])
def test_streams_not_starting_at_zero(tmp_path, suffix):
    drawn = marked_frames(40, seed=3)
    path = tmp_path / f"offset{suffix}"
    _write_with_offset(path, drawn, start_pts=17)
    with PyAVVideoSource(path) as src:
        assert src.num_frames == 40  # Matroska has no frame count: counted by demuxing
        full = src.read_all()
        np.testing.assert_array_equal(decode_marker(full), np.arange(40))
        for indices in ([0], [39], [12, 3, 38, 20, 20], [21, 22, 40]):
            np.testing.assert_array_equal(decode_marker(src.read_frames(indices)), np.minimum(indices, 39))


def test_write_video_odd_size_and_bad_input(tmp_path):
    drawn = marked_frames(10, height=30, width=45)
    with PyAVVideoSource(write_video(tmp_path / "odd.mp4", drawn, 10)) as src:
        assert (src.width, src.height, src.num_frames) == (45, 30, 10)
        assert np.abs(src.read_all().astype(float) - drawn).mean() < 3.0
    with pytest.raises(ValueError, match="uint8"):
        write_video(tmp_path / "bad.mp4", drawn.astype(np.float32), 10)
    assert not list(tmp_path.glob(".*partial*"))


def test_video_writer_in_chunks_equals_one_write_and_abort_leaves_nothing(tmp_path):
    """The one H.264 writer: chunks appended in order decode as the frames written (as write_video's
    single call does), nothing appears under the final name before close, and abort removes all."""
    drawn = marked_frames(24)
    writer = VideoWriter(tmp_path / "chunks.mp4", 12, drawn.shape[2], drawn.shape[1], crf=17, gop=12)
    for start in range(0, 24, 5):
        writer.write(drawn[start:start + 5])
    assert not (tmp_path / "chunks.mp4").exists() and writer.count == 24
    one_path = write_video(tmp_path / "one.mp4", drawn, 12)
    with PyAVVideoSource(writer.close()) as chunked, PyAVVideoSource(one_path) as one:
        assert chunked.num_frames == one.num_frames == 24
        np.testing.assert_array_equal(decode_marker(chunked.read_all()), np.arange(24))
        np.testing.assert_array_equal(chunked.read_all(), one.read_all())  # same settings: the same stream
    aborted = VideoWriter(tmp_path / "aborted.mp4", 12, drawn.shape[2], drawn.shape[1])
    aborted.write(drawn[:3])
    aborted.abort()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chunks.mp4", "one.mp4"]


def _write_folder(folder, frames, first_number):
    folder.mkdir()
    for i, frame in enumerate(frames):
        Image.fromarray(frame).save(folder / f"{i + first_number:06d}.png")


def test_frame_folder_source(tmp_path):
    drawn = marked_frames(12, seed=5)
    _write_folder(tmp_path / "one_based", drawn, 1)
    _write_folder(tmp_path / "zero_based", drawn, 0)
    with FrameFolderSource(tmp_path / "one_based") as src:
        assert (src.num_frames, src.width, src.height) == (12, WIDTH, HEIGHT)
        for indices in ([0], [11, 0, 11, 13], [5, 3, 7]):
            np.testing.assert_array_equal(src.read_frames(indices), drawn[np.minimum(indices, 11)])
    np.testing.assert_array_equal(FrameFolderSource(tmp_path / "zero_based", index_offset=0).read_all(), drawn)
    with pytest.raises(VideoDecodeError, match="index_offset=0"):
        FrameFolderSource(tmp_path / "zero_based")
    (tmp_path / "one_based" / "000005.png").unlink()
    with pytest.raises(VideoDecodeError, match="jump from 4 to 6"):
        FrameFolderSource(tmp_path / "one_based")


def test_open_video_resolution(tmp_path, video):
    path, _ = video
    (tmp_path / "a.mp4").write_bytes(path.read_bytes())
    _write_folder(tmp_path / "b", marked_frames(5), 1)
    assert isinstance(open_video(tmp_path, "a.mp4"), PyAVVideoSource)
    with open_video(tmp_path, "a.webm") as src:  # annotation names another container
        assert src.path == tmp_path / "a.mp4"
    with open_video(tmp_path, "b.mp4") as src:  # extracted frames
        assert isinstance(src, FrameFolderSource) and src.num_frames == 5
    with pytest.raises(FileNotFoundError) as err:
        open_video(tmp_path, "missing.mp4")
    for tried in ("missing.mp4", "missing.webm", "missing.mkv"):
        assert tried in str(err.value)


def test_corrupt_files_raise_naming_the_file(tmp_path, video):
    path, _ = video
    noise = tmp_path / "noise.mp4"
    noise.write_bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes())
    truncated = tmp_path / "truncated.mp4"  # moov atom at the end: cut off
    truncated.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    for bad in (noise, truncated):
        with pytest.raises(VideoDecodeError, match=bad.name):
            PyAVVideoSource(bad).read_frames([0])

    # header first (mp4 faststart, Matroska): opens, then the data ends early
    drawn = marked_frames(40)
    whole_mp4 = tmp_path / "whole.mp4"
    _write_with_offset(whole_mp4, drawn, 0, options={"movflags": "faststart"})
    whole_mkv = write_video(tmp_path / "whole.mkv", drawn, FPS)
    for whole, message in ((whole_mp4, "ends before frame 39"), (whole_mkv, "implies 40 frames")):
        cut = tmp_path / f"cut{whole.suffix}"
        cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
        with PyAVVideoSource(cut) as src:
            with pytest.raises(VideoDecodeError, match=f"cut{whole.suffix}.*{message}"):
                src.read_frames([39])
    with PyAVVideoSource(tmp_path / "cut.mp4") as src:  # what is there still decodes
        np.testing.assert_array_equal(decode_marker(src.read_frames([0, 1])), [0, 1])


def _write_rotated(path, degrees, frames):
    container = av.open(str(path), "w")
    stream = container.add_stream("libx264", rate=25)
    stream.height, stream.width = frames.shape[1:3]
    stream.pix_fmt = "yuv420p"
    stream.options = {"crf": "0"}
    stream.set_display_rotation(degrees)
    for frame in frames:
        for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)
    container.close()


@pytest.mark.parametrize("degrees, turns", [(90, 1), (-90, 3), (180, 2), (0, 0)])
def test_display_rotation_is_applied(tmp_path, degrees, turns):
    # stored 32 x 64 (H x W) frames, a bright block in the stored top-left corner; PyAV's rotation
    # is counter-clockwise, as np.rot90's: after a +90 turn the block is bottom-left
    stored = np.full((6, 32, 64, 3), 40, dtype=np.uint8)
    stored[:, :8, :16] = 230
    path = tmp_path / f"rot{degrees}.mp4"
    _write_rotated(path, degrees, stored)
    expected = np.rot90(stored[0], turns)
    with PyAVVideoSource(path) as video:  # size asked before any read: probed from the first frame
        assert (video.height, video.width) == expected.shape[:2]
        assert video.quarter_turns == turns
        frames = video.read_frames([0, 5, 2])
    assert frames.shape == (3, *expected.shape) and frames.flags["C_CONTIGUOUS"]
    bright = frames[1, ..., 0] > 135
    assert np.array_equal(bright, expected[..., 0] > 135)
    with PyAVVideoSource(path) as video:  # rotation learnt from the first read, then the size
        assert video.read_all().shape == (6, *expected.shape)
        assert (video.height, video.width) == expected.shape[:2]
    with PyAVVideoSource(path, autorotate=False) as video:
        assert (video.height, video.width) == (32, 64) and video.read_frames([1]).shape == (1, 32, 64, 3)


def test_frames_past_the_end_are_an_error_not_copies(tmp_path):
    """A clip running past its video's end is refused (beyond the documented tolerance), never
    filled with copies of the last frame."""
    from datamodules.grounded_dataset import GroundedClipDataset
    from formats.records import GroundedRecord
    from formats.video_reader import END_TOLERANCE

    drawn = marked_frames(3, seed=2)
    mp4 = write_video(tmp_path / "three.mp4", drawn, FPS)
    _write_folder(tmp_path / "three_frames", drawn, 1)
    for source in (PyAVVideoSource(mp4), FrameFolderSource(tmp_path / "three_frames")):
        with source:
            within = source.read_frames(range(3 + END_TOLERANCE))  # headers may overstate by a frame or two
            np.testing.assert_array_equal(decode_marker(within), [0, 1, 2] + [2] * END_TOLERANCE)
            with pytest.raises(VideoDecodeError, match=r"frame 199 requested but the video has 3 frames"):
                source.read_frames(range(200))
            with pytest.raises(VideoDecodeError, match=str(source.path.name)):
                source.read_frames([3 + END_TOLERANCE])

    grid = list(range(0, 200, 5))
    record = GroundedRecord.from_dict({
        "video_fname": "three.mp4", "video_id": "three", "clip_id": "0", "fps": 25.0, "clip_start_frame": 0,
        "clip_end_frame": 199, "width": WIDTH, "height": HEIGHT, "caption": "a cat", "tagged_caption": "<p>a cat</p>",
        "phrases": ["a cat"], "bboxes": [[[1, 1, 9, 9]]] * len(grid), "labels": [["a cat"]] * len(grid)})
    skipping = GroundedClipDataset([record], tmp_path, num_frames=4, global_image_size=32, grounding_image_size=32)
    sample = skipping[0]
    assert "global_frames" not in sample
    (key, reason), = sample["skipped"]
    assert key == "three_0" and "three.mp4" in reason and "has 3 frames" in reason
    raising = GroundedClipDataset([record], tmp_path, num_frames=4, global_image_size=32, grounding_image_size=32,
                                  on_error="raise")
    with pytest.raises(VideoDecodeError, match="three.mp4"):
        raising[0]


def test_implausible_frame_rate_is_one_skip_naming_it(tmp_path):
    """A stream claiming 0.002 fps is refused by name (not cut into one-frame clips), also when
    the annotation pipeline cuts a folder of videos into clips."""
    from annotation.clips import clips_from_videos

    write_video(tmp_path / "slow.mp4", marked_frames(6, seed=3), 0.002)
    write_video(tmp_path / "fine.mp4", marked_frames(50, seed=4), FPS)
    with pytest.raises(VideoDecodeError, match=r"slow.mp4: the video stream declares 0.002 fps"):
        PyAVVideoSource(tmp_path / "slow.mp4")
    specs, skipped = clips_from_videos(tmp_path, seconds=1.0, min_seconds=0.5)
    assert [s.video_fname for s in specs] == ["fine.mp4", "fine.mp4"]
    (skip,) = skipped
    assert skip.video_fname == "slow.mp4" and "0.002 fps" in skip.reason


@pytest.mark.parametrize("gop", [12, 120])
def test_seeking_past_unreferenced_frames_changes_no_pixel(tmp_path, gop):
    """Sought frames equal a full decode on B-frame video (frames before the target that nothing
    refers to are skipped), and a full decode after a sparse read on the same reader drops none."""
    rng = np.random.default_rng(gop)
    drawn = rng.integers(0, 255, (120, 48, 64, 3), dtype=np.uint8)
    path = write_video(tmp_path / "b.mp4", drawn, 25, gop=gop)
    with PyAVVideoSource(path) as src:
        full = src.read_all()
    for _ in range(6):
        indices = np.sort(rng.choice(120, size=int(rng.integers(1, 9)), replace=False)).tolist()
        with PyAVVideoSource(path) as src:
            np.testing.assert_array_equal(src.read_frames(indices), full[indices], err_msg=str(indices))
            np.testing.assert_array_equal(src.read_all(), full)


def test_the_writer_gives_the_same_file_wherever_the_frames_lie_in_memory(tmp_path):
    """The same frames from one array, from a fresh array each, from views into larger arrays and in
    chunks of any size: the same bytes (the encoder's colour conversion reads no memory the frames
    do not own)."""
    from formats.video_writer import VideoWriter

    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (12, 48, 80, 3), dtype=np.uint8)
    layouts = {
        "one array": [frames],
        "fresh arrays": [np.array(f[None]) for f in frames],
        "views into noise": [],
        "chunks": [frames[:5], frames[5:6], frames[6:]],
    }
    for f in frames:
        noise = rng.integers(0, 256, (3, 50, 80, 3), dtype=np.uint8)
        noise[1, :48] = f
        layouts["views into noise"].append(noise[1:2, :48])
    written = {}
    for name, chunks in layouts.items():
        writer = VideoWriter(tmp_path / f"{name}.mp4", 10, 80, 48, crf=20)
        for chunk in chunks:
            writer.write(chunk)
        written[name] = writer.close().read_bytes()
    assert all(data == written["one array"] for data in written.values())
