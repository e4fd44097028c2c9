"""Frames of a live source as they arrive: a network stream, a camera, a file still being written, stdin.

:class:`LiveSource` opens what FFmpeg opens (through PyAV, as :mod:`formats.video_reader` does for files):
``rtsp://``, ``http(s)://`` (HLS playlists too), ``udp://``/``tcp://`` MPEG-TS, a camera device
(``/dev/videoN``, v4l2), ``-`` for stdin, and a path that is still growing (``follow``: a streamable
container such as MPEG-TS; a plain MP4 keeps its index at the end and cannot be read while written).
With ``listen``, an ``rtsp://`` or ``tcp://`` address is served here and the source pushes to it.

:meth:`LiveSource.grid_frames` yields the frames that fall on the 5-fps annotation grid
(:func:`formats.frame_grids.annotation_step`) with their source index (from the presentation time,
so on a constant-rate stream the indices and frames are those of :func:`formats.video_reader.stream_frames`
on the finished file) and their arrival time (``time.monotonic()``). A stall longer than
``stall_timeout`` s, an error or the end of a network stream is reported as a :class:`LiveGap`, then
the source is reopened with exponential backoff, at most ``reconnects`` times; a file or stdin that
ends, or a source out of reconnects, ends the iteration. Nothing waits without a bound.
"""
from __future__ import annotations

from core.user_errors import UserInputError

import math
import os
import sys
import threading
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import IO, Iterator

import numpy as np

from formats.frame_grids import annotation_step
from formats.video_reader import quarter_turns

NETWORK_SCHEMES = ("rtsp", "rtsps", "rtmp", "http", "https", "udp", "tcp", "srt", "hls")
LISTENING_SCHEMES = ("rtsp", "tcp")


@dataclass
class LiveFrame:
    """A grid frame: source ``index`` (``time_s * fps``, rounded), stream time, arrival and RGB pixels."""

    index: int
    time_s: float
    arrival: float
    pixels: np.ndarray


@dataclass
class LiveGap:
    """A stretch without frames: from the last frame before it to the reopening (``end_s`` None: never)."""

    start_s: float
    end_s: float | None
    reason: str

    def describe(self, source: str) -> str:
        end = "end" if self.end_s is None else f"{self.end_s:.2f} s"
        return f"{source}: no frames {self.start_s:.2f} s - {end}: {self.reason}"


def scheme(source: str) -> str:
    """The URL's scheme, lower case ('' for a path)."""
    return source.split("://", 1)[0].lower() if "://" in source else ""


def is_network(source: str) -> bool:
    return scheme(source) in NETWORK_SCHEMES


class GrowingFile(IO[bytes]):
    """A file read while another process appends to it: at its current end a read waits for more,
    polling every ``poll`` s, and returns the end of the file after ``idle`` s without growth (or
    once ``stop`` is set)."""

    def __init__(self, path: str | Path, idle: float = 5.0, poll: float = 0.05,
                 stop: threading.Event | None = None):
        self.path = Path(path)
        self.handle = open(self.path, "rb")
        self.idle, self.poll = float(idle), float(poll)
        self.stop = stop or threading.Event()

    def read(self, size: int = -1) -> bytes:
        waited = 0.0
        while True:
            data = self.handle.read(size)
            if data or self.stop.is_set() or waited >= self.idle:
                return data
            time.sleep(self.poll)
            waited += self.poll

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        self.handle.close()


class LiveSource:
    """One live source (see the module's docstring).

    Args:
        source: a URL, a device path, a file path, or ``-`` (stdin).
        follow: read a file while it grows; it ends after ``stall_timeout`` s without growth.
        stall_timeout: seconds without data that count as a stall (network: FFmpeg's read timeout).
        reconnects: how many times a network source is reopened after a stall, error or end.
        backoff: the first wait before reopening (doubled each time).
        fps: the frame rate when the stream does not say (cameras, some raw streams).
        input_format: FFmpeg's demuxer (``v4l2``, ``mpegts``, ...); None: probed (``v4l2`` for ``/dev/video*``).
        options: FFmpeg options for opening (``{"rtsp_transport": "tcp"}``, camera ``video_size``, ...).
        listen: wait up to this many seconds for the source to connect and push to the address (an
            ``rtsp://`` URL: RTSP's listen mode, the encoder publishing with ANNOUNCE and RECORD; a
            ``tcp://`` one: a listening socket); None: connect to it. ``udp://`` always listens.
    """

    def __init__(self, source: str, follow: bool = False, stall_timeout: float = 5.0, reconnects: int = 3,
                 backoff: float = 0.5, fps: float | None = None, input_format: str | None = None,
                 options: dict[str, str] | None = None, listen: float | None = None):
        self.source = str(source)
        if listen is not None and scheme(self.source) not in LISTENING_SCHEMES:
            listening = " and ".join(f"{name}://" for name in LISTENING_SCHEMES)
            raise UserInputError(f"listening is for {listening} sources, not {self.source!r}")
        self.listen = listen
        self.follow = follow
        self.stall_timeout = float(stall_timeout)
        self.reconnects = int(reconnects)
        self.backoff = float(backoff)
        self.fps = fps
        self.input_format = input_format or ("v4l2" if self.source.startswith("/dev/video") else None)
        self.options = dict(options or {})
        self.stop = threading.Event()
        self.gaps: list[LiveGap] = []
        self.reopened = 0
        self.ended: str | None = None  # why the iteration ended
        self.width = self.height = 0
        self.last_index = -1  # the last frame decoded (grid or not)

    @property
    def network(self) -> bool:
        return is_network(self.source)

    def _open(self):
        import av

        if self.source == "-":
            return av.open(sys.stdin.buffer, mode="r", format=self.input_format or "mpegts")
        if self.follow:
            return av.open(GrowingFile(self.source, self.stall_timeout, stop=self.stop), mode="r",
                           format=self.input_format)
        if not self.network and not self.source.startswith("/dev/") and not os.path.exists(self.source):
            raise FileNotFoundError(f"{self.source}: no such file")
        options, wait = dict(self.options), self.stall_timeout
        if self.listen is not None:
            # the wait is PyAV's timeout callback's (connecting, then probing); FFmpeg's own outlasts it.
            # Always given: FFmpeg's rtsp default (-1 s) reaches its TCP listener as -1000 ms, out of range
            wait += self.listen
            if scheme(self.source) == "tcp":
                options = {"listen": "1", "listen_timeout": str(int(wait * 1000) + 1000), **options}  # ms
            else:
                options = {"rtsp_flags": "listen", "listen_timeout": str(math.ceil(wait) + 1), **options}  # s
        return av.open(self.source, mode="r", format=self.input_format, options=options,
                       timeout=(wait, self.stall_timeout) if self.network else None)

    def _frames(self, container, offset: float) -> Iterator[tuple[float, np.ndarray]]:
        """``(stream time s, RGB)`` per decoded frame, the first at ``offset``. A frame without a
        presentation time takes its neighbour's one frame period away: RTSP gives none to the frames
        before the first RTCP sender report (RFC 3550, 6.4.1, maps RTP time to wall time), which
        would otherwise shift every later index by those frames."""
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        rotate = stream.metadata.get("rotate")
        turns = quarter_turns(float(rotate) if rotate else None, self.source)
        period = 1.0 / float(self.fps)
        origin, last, waiting = None, None, []  # waiting: frames before the first with a time
        for frame in self._decoded(container, stream):
            if self.stop.is_set():
                return
            rgb = frame.to_ndarray(format="rgb24")
            rgb = np.ascontiguousarray(np.rot90(rgb, -turns)) if turns else rgb
            time_base = frame.time_base or stream.time_base  # frames flushed from the decoder may lack it
            if frame.pts is None or time_base is None:
                if last is None:
                    waiting.append(rgb)
                    continue
                last += period
                yield last, rgb
                continue
            if origin is None:
                origin = frame.pts * time_base - Fraction(len(waiting)) * Fraction(period).limit_denominator(10 ** 6)
                for k, early in enumerate(waiting):
                    yield offset + k * period, early
                waiting = []
            last = offset + float(frame.pts * time_base - origin)
            yield last, rgb
        for k, early in enumerate(waiting):  # a stream that never gave a time
            yield offset + k * period, early

    @staticmethod
    def _decoded(container, stream):
        """The stream's frames; when reading fails (a connection cut, a stall), the frames the decoder
        still holds come out before the error is raised."""
        failure = None
        try:
            for packet in container.demux(stream):
                yield from packet.decode()
        except Exception as err:  # noqa: BLE001  (raised again below, after the flush)
            failure = err
        try:
            yield from stream.codec_context.decode(None)
        except Exception:  # noqa: BLE001  (a decoder that cannot flush has nothing more to give)
            pass
        if failure is not None:
            raise failure

    def _failure(self, err: Exception, opening: bool = False) -> str:
        """What went wrong, in words: FFmpeg's timeout callback ends a wait with ExitError."""
        import av

        if isinstance(err, av.ExitError):
            if opening and self.listen is not None:
                return f"nothing connected within {self.listen + self.stall_timeout:g} s"
            return f"no data for {self.stall_timeout:g} s"
        return f"{type(err).__name__}: {err}"

    def rate(self, container) -> float:
        if not container.streams.video:
            raise ValueError("no video stream")
        stream = container.streams.video[0]
        rate = self.fps or stream.average_rate or stream.guessed_rate or stream.base_rate
        return float(rate) if rate else 25.0

    def grid_frames(self) -> Iterator[LiveFrame | LiveGap]:
        """The grid frames as they arrive, and the gaps; ends with the stream (``ended`` says why)."""
        offset, last_t, last_arrival, next_index, tries = 0.0, None, None, 0, 0
        while not self.stop.is_set():
            try:
                container = self._open()
            except Exception as err:  # noqa: BLE001  (every failure to open is the same for a live source)
                reason = f"cannot open: {self._failure(err, opening=True)}"
                if not self.network or tries >= self.reconnects:
                    self.ended = reason
                    if last_t is not None:
                        self.gaps.append(LiveGap(last_t, None, reason))
                        yield self.gaps[-1]
                    return
                tries += 1
                time.sleep(self.backoff * 2 ** (tries - 1))
                continue
            if last_t is not None:  # reopened: its clock starts after the wall time missed
                offset = last_t + (time.monotonic() - last_arrival)
                self.reopened += 1
            reason = "the stream ended"
            reopened_gap = last_t is not None
            try:
                self.fps = self.rate(container)
                step = annotation_step(self.fps)
                for t, rgb in self._frames(container, offset):
                    index = int(round(t * self.fps))
                    arrival = time.monotonic()
                    if reopened_gap:
                        self.gaps.append(LiveGap(last_t, t, self.gaps_reason))
                        yield self.gaps[-1]
                        reopened_gap = False
                        next_index = max(next_index, -(-index // step) * step)
                    last_t, last_arrival = t, arrival
                    self.last_index = max(self.last_index, index)
                    if index < next_index:
                        continue
                    tries = 0
                    self.height, self.width = rgb.shape[:2]
                    next_index = (index // step + 1) * step
                    yield LiveFrame(index, round(t, 4), arrival, rgb)
            except Exception as err:  # noqa: BLE001  (a stall or a broken stream: reported, then reopened)
                reason = self._failure(err)
            finally:
                container.close()
            if self.stop.is_set():
                self.ended = "stopped"
                return
            if not self.network or tries >= self.reconnects:
                self.ended = reason
                if tries and last_t is not None:
                    self.gaps.append(LiveGap(last_t, None, reason))
                    yield self.gaps[-1]
                return
            self.gaps_reason = reason
            tries += 1
            time.sleep(self.backoff * 2 ** (tries - 1))
        self.ended = "stopped"

    gaps_reason = ""


__all__ = ["LiveSource", "LiveFrame", "LiveGap", "GrowingFile", "is_network"]
