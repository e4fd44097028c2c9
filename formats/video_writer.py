"""The one H.264 writer: MP4s written chunk by chunk and renamed into place when complete
(:class:`VideoWriter`), or from an array at once (:func:`write_video`)."""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from formats.yuv_frames import yuv_format


class VideoWriter:
    """H.264 (libx264) MP4 written chunk by chunk (frames never all in memory), renamed into place on
    :meth:`close`, so an interrupted write never leaves a file that looks complete (:meth:`abort`
    removes the partial file).

    yuv420p (what every player and decoder handles) needs even sizes; odd sizes are encoded
    yuv444p instead so the frames keep their exact size (:func:`formats.yuv_frames.yuv_format`).
    Frames come as RGB (:meth:`write`) or as planes in that format (:meth:`write_yuv`). ``gop``: the
    keyframe interval in frames (None: the encoder's default).
    """

    def __init__(self, path: str | Path, fps: float, width: int, height: int, crf: int = 20,
                 preset: str = "veryfast", gop: int | None = None, threads: int | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.path.with_name(f".{self.path.stem}.partial{self.path.suffix}")
        self.container = av.open(str(self.tmp), "w")
        try:
            self.stream = self.container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
            self.stream.width, self.stream.height = width, height
            self.stream.pix_fmt = yuv_format(width, height)
            if gop is not None:
                self.stream.codec_context.gop_size = gop
            options = {"crf": str(crf), "preset": preset}
            if threads is not None:
                options["threads"] = str(threads)
            self.stream.options = options
        except BaseException:
            self.abort()
            raise
        self.count = 0
        self._frame = np.zeros((height + 2, width, 3), dtype=np.uint8)  # rows past the image stay zero

    def write(self, frames: np.ndarray) -> None:
        """Append ``(N, H, W, 3)`` uint8 RGB frames.

        Each frame is encoded from one buffer of this writer's, zero past the image: FFmpeg's colour
        conversion may read a few bytes beyond a frame's last row, and a frame buffer of its own
        leaves those bytes unset, which made the file differ from run to run."""
        for array in frames:
            self._frame[:self.stream.height] = array
            frame = av.VideoFrame.from_numpy_buffer(self._frame[:self.stream.height], format="rgb24")
            frame.pts = self.count
            self.count += 1
            self.container.mux(self.stream.encode(frame))  # converted and copied before it returns

    def write_yuv(self, y: np.ndarray, u: np.ndarray, v: np.ndarray, tags: tuple[int, int, int, int] | None = None
                  ) -> None:
        """Append frames given as planes in this writer's pixel format: ``(N, H, W)`` luma and ``(N, h, w)``
        chroma (:func:`formats.yuv_frames.yuv_format`). ``tags``: the colour tags of the planes
        (:attr:`core.yuv_compositing.YuvFrame.tags`), written into the file with the first frame.

        The encoder takes the planes as they are: no colour conversion."""
        if self.count == 0 and tags is not None:
            context = self.stream.codec_context
            context.colorspace, context.color_range, context.color_primaries, context.color_trc = (int(t) for t in tags)
        for k in range(len(y)):
            frame = av.VideoFrame(self.stream.width, self.stream.height, self.stream.pix_fmt)
            for plane, source in zip(frame.planes, (y[k], u[k], v[k])):
                if source.shape != (plane.height, plane.width):
                    raise ValueError(f"{self.path}: a {self.stream.pix_fmt} plane of {plane.width}x{plane.height} "
                                     f"was given as {source.shape[1]}x{source.shape[0]}")
                np.frombuffer(plane, np.uint8).reshape(plane.height, plane.line_size)[:, :plane.width] = source
            if tags is not None:
                frame.colorspace, frame.color_range = int(tags[0]), int(tags[1])
            frame.pts = self.count
            self.count += 1
            self.container.mux(self.stream.encode(frame))

    def close(self) -> Path:
        """Flush the encoder and rename the finished file into place."""
        try:
            self.container.mux(self.stream.encode())
        except BaseException:
            self.abort()
            raise
        self.container.close()
        self.tmp.replace(self.path)
        return self.path

    def abort(self) -> None:
        """Close without finishing; the partial file is removed."""
        self.container.close()
        self.tmp.unlink(missing_ok=True)


def write_video(path: str | Path, frames: np.ndarray, fps: float, crf: int = 17, gop: int | None = None,
                preset: str = "veryfast", threads: int | None = None) -> Path:
    """Encode ``(N, H, W, 3)`` uint8 RGB frames as H.264 into ``path`` (:class:`VideoWriter`).

    The keyframe interval defaults to one second so reading a few frames seeks cheaply.
    """
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8 or len(frames) == 0:
        raise ValueError(f"{path}: frames must be a non-empty (N, H, W, 3) uint8 array, "
                         f"got {frames.shape} {frames.dtype}")
    rate = Fraction(fps).limit_denominator(1001)
    writer = VideoWriter(path, fps, frames.shape[2], frames.shape[1], crf=crf, preset=preset,
                         gop=gop or max(1, int(round(float(rate)))), threads=threads)
    try:
        writer.write(frames)
    except BaseException:
        writer.abort()
        raise
    return writer.close()
