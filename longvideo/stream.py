"""One forward pass through a video file: the wanted frames in order, and the stretches that failed.

Long videos are read once, start to end, packet by packet (no seek per clip or per frame, no
frame kept after it is handed on), so memory does not grow with the video's length. A packet
the decoder rejects does not end the pass: the frames it would have produced are reported as a
:class:`DecodeGap` (with its time in seconds and the decoder's message) and decoding resumes at
the next packet that decodes.

Frame ``i`` is the frame presented at ``i / fps`` seconds after the stream's first timestamp, as
:class:`formats.video.PyAVVideoSource` counts frames (``fps`` = the stream's average rate),
so a variable-frame-rate video is read on its nominal grid: a wanted index is served by the
first frame presented at or after it (frame for frame what the seeking reader gives). Frames
come upright (the display matrix's quarter turns).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Iterator, Sequence

import av
import numpy as np

from formats.video import VideoDecodeError

# a jump over more than this many seconds between decoded frames, without a decoder error, is a gap too
MAX_SILENT_JUMP_S = 1.0
# wanted frames up to this many past the last decoded one are served by it (headers overstating the length)
END_TOLERANCE = 2


@dataclass(frozen=True)
class DecodeGap:
    """Frames ``first..last`` (source indices) could not be decoded; ``reason`` names the error."""

    first: int
    last: int
    start_s: float
    end_s: float
    reason: str

    def describe(self, path: str | Path) -> str:
        return (f"{path}: frames {self.first}-{self.last} ({self.start_s:.2f}-{self.end_s:.2f} s) not decoded: "
                f"{self.reason}")


def quarter_turns(frame: av.VideoFrame) -> int:
    """Counter-clockwise quarter turns the display matrix asks for (the nearest one)."""
    return int(round(int(getattr(frame, "rotation", 0) or 0) / 90.0)) % 4


def stream_frames(path: str | Path, wanted: Sequence[int], fps: float,
                  num_frames: int) -> Iterator[tuple[int, np.ndarray] | DecodeGap]:
    """Yield ``(index, RGB uint8 frame)`` for every index of ``wanted`` (sorted, unique), in order, and
    a :class:`DecodeGap` where wanted frames could not be decoded. One pass, no seek."""
    wanted = np.asarray(wanted, dtype=np.int64)
    path = Path(path)
    rate = Fraction(fps).limit_denominator(1001)
    try:
        container = av.open(str(path))
    except (av.FFmpegError, OSError, ValueError) as err:
        raise VideoDecodeError(f"{path}: cannot open video ({err})") from None
    try:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        time_base = Fraction(stream.time_base)
        start_pts = stream.start_time
        w = 0
        last_index = -1  # index of the last frame decoded
        error: str | None = None  # a decoder error since the last good frame
        last_frame = None
        turns: list[int] = []

        def upright(frame: av.VideoFrame) -> np.ndarray:
            if not turns:
                turns.append(quarter_turns(frame))
            array = frame.to_ndarray(format="rgb24")
            return np.ascontiguousarray(np.rot90(array, turns[0])) if turns[0] else array

        def gap_until(index: int, reason: str) -> Iterator[DecodeGap]:
            nonlocal w
            first = w
            while w < len(wanted) and wanted[w] < index:
                w += 1
            if w > first:
                lo, hi = int(wanted[first]), int(wanted[w - 1])
                yield DecodeGap(lo, hi, lo / float(rate), (hi + 1) / float(rate), reason)

        for packet in container.demux(stream):
            if w >= len(wanted):
                break
            try:
                frames = packet.decode()
            except av.FFmpegError as err:
                error = f"{type(err).__name__}: {err}"
                continue
            for frame in frames:
                if frame.pts is None:
                    index = last_index + 1
                else:
                    if start_pts is None:
                        start_pts = frame.pts
                    index = int(round((frame.pts - start_pts) * time_base * rate))
                index = max(index, last_index)  # two frames rounding to one slot (variable rate): the first serves it
                jump = index - last_index
                if error is not None or jump > MAX_SILENT_JUMP_S * float(rate):
                    reason = error or f"no frame for {jump / float(rate):.2f} s"
                    yield from gap_until(index, reason)
                error = None
                last_index, last_frame = index, frame
                if w >= len(wanted) or wanted[w] > index:
                    continue
                array = upright(frame)
                while w < len(wanted) and wanted[w] <= index:
                    yield int(wanted[w]), array
                    w += 1
        # the end: frames wanted past the last decoded one
        near_end = last_frame is not None and int(wanted[-1]) - last_index <= END_TOLERANCE
        if w < len(wanted) and error is None and near_end:
            array = upright(last_frame)  # a header overstating the length by a frame or two
            while w < len(wanted):
                yield int(wanted[w]), array
                w += 1
        if w < len(wanted):
            reason = error or f"the stream ends at frame {last_index} of the {num_frames} its header declares"
            yield from gap_until(int(wanted[-1]) + 1, reason)
    except av.FFmpegError as err:
        raise VideoDecodeError(f"{path}: decoding failed ({err})") from None
    finally:
        container.close()
