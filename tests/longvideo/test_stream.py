"""One-pass streaming decode: parity with the seeking reader, gaps named with their time, rotation,
variable frame rate."""
from fractions import Fraction

import av
import numpy as np
import pytest

from formats.video_reader import DecodeGap, PyAVVideoSource, stream_frames
from formats.video_writer import write_video


def marked_frames(n, h=32, w=48):
    """Frame i is uniform grey level 4 * (i mod 62): its index (mod 62) survives lossy coding."""
    levels = 4 * (np.arange(n) % 62)
    return np.broadcast_to(levels[:, None, None, None], (n, h, w, 3)).astype(np.uint8).copy()


def read_marker(frame):
    return int(round(float(frame.mean()) / 4))


def collect(path, wanted):
    frames, gaps = {}, []
    for item in stream_frames(path, wanted):
        if isinstance(item, DecodeGap):
            gaps.append(item)
        else:
            frames[item[0]] = item[1]
    return frames, gaps


@pytest.mark.parametrize("seed", range(3))
def test_streamed_frames_equal_the_seeking_readers(tmp_path, seed):
    rng = np.random.default_rng(seed)
    path = write_video(tmp_path / "v.mp4", marked_frames(90), fps=30, gop=int(rng.integers(5, 40)))
    wanted = np.unique(rng.integers(0, 90, int(rng.integers(1, 40))))
    frames, gaps = collect(path, wanted)
    assert gaps == [] and list(frames) == wanted.tolist()
    with PyAVVideoSource(path) as video:
        expected = video.read_frames(wanted.tolist())
    np.testing.assert_array_equal(np.stack([frames[int(i)] for i in wanted]), expected)
    assert [read_marker(frames[int(i)]) for i in wanted] == (wanted % 62).tolist()


def test_corrupt_middle_is_a_gap_named_with_its_time_and_decoding_goes_on(tmp_path):
    rng = np.random.default_rng(0)
    noisy = rng.integers(0, 255, (200, 64, 96, 3), dtype=np.uint8)  # big packets: the damage stays local
    path = write_video(tmp_path / "v.mp4", noisy, fps=25, gop=25)
    data = bytearray(path.read_bytes())
    start, length = int(len(data) * 0.45), int(len(data) * 0.1)
    data[start:start + length] = rng.integers(0, 255, length, dtype=np.uint8).tobytes()
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(bytes(data))
    wanted = np.arange(0, 200, 5)
    frames, gaps = collect(bad, wanted)
    assert len(gaps) == 1
    gap = gaps[0]
    assert 40 < gap.first <= gap.last < 160  # in the damaged middle
    assert gap.start_s == pytest.approx(gap.first / 25) and gap.end_s == pytest.approx((gap.last + 1) / 25)
    assert "Invalid data" in gap.reason
    assert f"{gap.start_s:.2f}-{gap.end_s:.2f} s" in gap.describe(bad)
    missing = set(wanted.tolist()) - set(frames)
    assert missing == {int(i) for i in wanted if gap.first <= i <= gap.last}
    assert min(frames) == 0 and max(frames) == 195  # before and after the gap


def test_display_rotation_is_applied_as_the_seeking_reader_does(tmp_path):
    stored = np.full((6, 32, 64, 3), 40, dtype=np.uint8)
    stored[:, :8, :16] = 230
    path = tmp_path / "rot.mp4"
    container = av.open(str(path), "w")
    stream = container.add_stream("libx264", rate=25)
    stream.height, stream.width = 32, 64
    stream.pix_fmt = "yuv420p"
    stream.set_display_rotation(90)
    for frame in stored:
        container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
    container.mux(stream.encode())
    container.close()
    frames, _ = collect(path, [0, 3])
    assert frames[0].shape == (64, 32, 3)
    with PyAVVideoSource(path) as video:
        np.testing.assert_array_equal(frames[3], video.read_frames([3])[0])


def test_variable_frame_rate_is_read_on_the_nominal_grid(tmp_path):
    """Frames presented at irregular times: a wanted index is the first frame shown at or after it,
    as the seeking reader serves it."""
    times_ms = np.cumsum(np.r_[0, np.tile([20, 60, 40], 20)])  # 61 frames, 40 ms on average
    path = tmp_path / "vfr.mkv"
    container = av.open(str(path), "w")
    stream = container.add_stream("libx264", rate=25)
    stream.height, stream.width = 32, 48
    stream.pix_fmt = "yuv420p"
    stream.codec_context.time_base = Fraction(1, 1000)
    for i, t in enumerate(times_ms):
        frame = av.VideoFrame.from_ndarray(marked_frames(61)[i], format="rgb24")
        frame.pts, frame.time_base = int(t), Fraction(1, 1000)
        container.mux(stream.encode(frame))
    container.mux(stream.encode())
    container.close()
    with PyAVVideoSource(path) as video:
        fps, n = video.fps, video.num_frames
        wanted = np.arange(0, n, 5)
        expected = video.read_frames(wanted.tolist())
    frames, gaps = collect(path, wanted)
    assert gaps == []
    np.testing.assert_array_equal(np.stack([frames[int(i)] for i in wanted]), expected)
    shown_at = times_ms * fps / 1000  # the frame served for index i is the first shown at or after i
    for i in wanted:
        first = int(np.searchsorted(np.round(shown_at), i))
        assert read_marker(frames[int(i)]) == min(first, 60) % 62
