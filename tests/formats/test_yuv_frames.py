"""Frames read as YUV planes are the frames the RGB reads give, in the writer's format, upright; the
writer encodes planes as they are, with their colour tags."""
from core.yuv_compositing import FULL_RANGE, YuvFrame

import av
import numpy as np
import pytest

from formats.video_reader import PyAVVideoSource, stream_frames
from formats.video_writer import VideoWriter
from formats.yuv_frames import RgbToYuv, frame_yuv, yuv_format


def _encode(path, frames, pix_fmt, rotation=0, crf=0, tags=None):
    container = av.open(str(path), "w")
    stream = container.add_stream("libx264", rate=25)
    stream.height, stream.width = frames.shape[1:3]
    stream.pix_fmt = pix_fmt
    stream.options = {"crf": str(crf), "preset": "ultrafast"}
    if rotation:
        stream.set_display_rotation(rotation)
    if tags:
        stream.codec_context.colorspace, stream.codec_context.color_range = tags
    for i, frame in enumerate(frames):
        vf = av.VideoFrame.from_ndarray(frame, format="rgb24").reformat(format=pix_fmt)
        vf.pts = i
        container.mux(stream.encode(vf))
    container.mux(stream.encode())
    container.close()
    return path


def _to_rgb(frame: YuvFrame) -> np.ndarray:
    """The planes back to RGB by FFmpeg's scaler, as the RGB reads convert decoded frames."""
    h, w = frame.y.shape
    if frame.subsampled:
        packed = np.concatenate([frame.y.reshape(-1), frame.u.reshape(-1), frame.v.reshape(-1)]).reshape(h * 3 // 2, w)
        vf = av.VideoFrame.from_ndarray(packed, format="yuv420p")
    else:
        vf = av.VideoFrame.from_ndarray(np.stack([frame.y, frame.u, frame.v]), format="yuv444p")
    vf.colorspace, vf.color_range = frame.colorspace, frame.color_range  # the matrix and range it is in
    return vf.to_ndarray(format="rgb24")


def _frames(rng, n, h, w):
    base = rng.integers(0, 256, (h, w + n, 3), dtype=np.uint8)
    return np.stack([base[:, i:i + w] for i in range(n)])


@pytest.mark.parametrize("size, pix_fmt", [((48, 64), "yuv420p"), ((33, 47), "yuv444p")])
def test_yuv_reads_are_the_rgb_reads_frames(tmp_path, size, pix_fmt):
    rng = np.random.default_rng(0)
    path = _encode(tmp_path / "v.mp4", _frames(rng, 12, *size), pix_fmt)
    with PyAVVideoSource(path) as video:
        rgb = video.read_frames([0, 7, 3, 11])
        yuv = video.read_frame_list([0, 7, 3, 11], colour="yuv")
        decoded = video.read_frame_list([7], colour="frame")[0]
        assert isinstance(decoded, av.VideoFrame)
        assert np.array_equal(video.upright_rgb(decoded), rgb[1])
    assert yuv_format(size[1], size[0]) == pix_fmt
    for got, expected in zip(yuv, rgb):
        assert got.y.shape == size and got.subsampled == (pix_fmt == "yuv420p")
        assert not got.y.flags.writeable  # the decoder's memory: never drawn on
        assert np.array_equal(_to_rgb(got), expected)
    streamed = [item[1] for item in stream_frames(path, [3, 7], colour="yuv")]
    assert all(np.array_equal(a.y, b.y) and np.array_equal(a.u, b.u) for a, b in zip(streamed, [yuv[2], yuv[1]]))


@pytest.mark.parametrize("degrees, turns", [(90, 1), (180, 2), (-90, 3)])
def test_yuv_reads_are_upright(tmp_path, degrees, turns):
    stored = np.full((4, 32, 64, 3), 40, dtype=np.uint8)
    stored[:, :8, :16] = 230
    path = _encode(tmp_path / "rot.mp4", stored, "yuv420p", rotation=degrees)
    with PyAVVideoSource(path) as video:
        rgb = video.read_frames([1])[0]
        yuv = video.read_frame_list([1], colour="yuv")[0]
    assert yuv.y.shape == rgb.shape[:2] == np.rot90(stored[0], turns).shape[:2]
    assert yuv.u.shape == (rgb.shape[0] // 2, rgb.shape[1] // 2)
    assert np.abs(_to_rgb(YuvFrame(*(np.ascontiguousarray(p) for p in (yuv.y, yuv.u, yuv.v)))).astype(int)
                  - rgb).max() <= 2


def test_other_pixel_formats_are_converted_to_the_writers_with_their_tags(tmp_path):
    yy, xx = np.mgrid[0:48, 0:64]  # smooth colours: resampling chroma moves them little
    frame = np.stack([128 + 100 * np.sin(xx / 9), 128 + 100 * np.cos(yy / 7), 128 + 60 * np.sin((xx + yy) / 11)], -1)
    frames = np.repeat(frame.astype(np.uint8)[None], 6, axis=0)
    path = _encode(tmp_path / "v422.mp4", frames, "yuv422p", tags=(1, FULL_RANGE))
    with PyAVVideoSource(path) as video:
        rgb = video.read_frames([2])[0]
        yuv = video.read_frame_list([2], colour="yuv")[0]
    assert yuv.subsampled and yuv.u.shape == (24, 32)  # 4:2:2 became the writer's 4:2:0
    assert yuv.colorspace == 1 and yuv.color_range == FULL_RANGE
    error = np.abs(_to_rgb(yuv).astype(int) - rgb)
    assert error.mean() < 3 and error.max() <= 12  # chroma resampled once; the range or matrix read wrong: 6-7


def test_planes_are_written_as_they_are_with_their_tags(tmp_path):
    rng = np.random.default_rng(2)
    y = rng.integers(16, 236, (5, 48, 64), dtype=np.uint8)
    u, v = (rng.integers(16, 241, (5, 24, 32), dtype=np.uint8) for _ in range(2))
    writer = VideoWriter(tmp_path / "planes.mp4", 25, 64, 48, crf=0, preset="ultrafast")
    writer.write_yuv(y, u, v, (1, 1, 1, 1))  # BT.709, limited range
    out = writer.close()
    with PyAVVideoSource(out) as video:
        back = video.read_frame_list(range(5), colour="yuv")
    for k, frame in enumerate(back):  # crf 0: lossless, the very planes
        assert np.array_equal(frame.y, y[k]) and np.array_equal(frame.u, u[k]) and np.array_equal(frame.v, v[k])
        assert frame.tags == (1, 1, 1, 1)
    bad = VideoWriter(tmp_path / "bad.mp4", 25, 64, 48)
    with pytest.raises(ValueError, match=r"bad.*plane of 32x24 was given as 64x48"):
        bad.write_yuv(y, y, y)
    bad.abort()


def test_rgb_frames_convert_as_the_writer_converted_them(tmp_path):
    rng = np.random.default_rng(3)
    frames = rng.integers(0, 256, (3, 33, 47, 3), dtype=np.uint8)
    convert = RgbToYuv(47, 33)
    yuv = [convert(f) for f in frames]
    assert not yuv[0].subsampled and yuv[0].y.shape == (33, 47)
    direct = [frame_yuv(av.VideoFrame.from_ndarray(f, format="rgb24").reformat(format="yuv444p")) for f in frames]
    assert all(np.array_equal(a.y, b.y) and np.array_equal(a.v, b.v) for a, b in zip(yuv, direct))
    with pytest.raises(ValueError, match="33x47"):
        convert(frames[0][:, :40])
