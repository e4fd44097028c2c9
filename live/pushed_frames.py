"""Frames handed in one at a time (a browser's camera, through the web demo's Live tab), on the 5-fps grid.

:class:`PushedFrameSource` is a frame source for :class:`live.session.LiveSession`, as
:class:`formats.live_source.LiveSource` is for what FFmpeg opens: ``push`` takes each frame as it
arrives and :meth:`PushedFrameSource.grid_frames` yields the 5-fps annotation grid
(:data:`formats.frame_grids.ANNOTATION_FPS`) from them, so the session cuts, schedules, predicts and
links pushed frames exactly as it does a stream's. The stream's clock is the arrival clock: a frame
pushed ``t`` s after the first one has ``time_s = t`` and grid index ``round(t * 5)``.

A browser sends frames when it can (a round trip per frame), not on the grid: a grid slot with no
frame of its own shows the latest frame that had arrived (the picture held, as a display holds it),
for holes up to ``hold_seconds``; a longer hole is a :class:`formats.live_source.LiveGap`, which
ends the clip run before it. No frame for ``stall_timeout`` s (``start_timeout`` before the first)
ends the source. At most
``capacity`` frames wait to be read; when the reader falls further behind, the oldest are dropped
and the hole they leave is held or a gap as above.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import Iterator

import numpy as np

from formats.frame_grids import ANNOTATION_FPS
from formats.live_source import LiveFrame, LiveGap


class PushedFrameSource:
    """Args:
        name: what the run's summary calls the source (``camera``).
        hold_seconds: the longest hole filled by holding the last frame; longer ones are gaps.
        stall_timeout: seconds without a frame that end the source.
        start_timeout: seconds to wait for the first frame (None: ``stall_timeout``).
        capacity: frames waiting to be read at most (the oldest are dropped beyond).
    """

    def __init__(self, name: str = "camera", hold_seconds: float = 1.0, stall_timeout: float = 10.0,
                 start_timeout: float | None = None, capacity: int = 64):
        start_timeout = stall_timeout if start_timeout is None else start_timeout
        if hold_seconds < 0 or stall_timeout <= 0 or start_timeout <= 0 or capacity < 1:
            raise ValueError(f"hold_seconds >= 0, stall_timeout > 0, start_timeout > 0 and capacity >= 1, got "
                             f"{hold_seconds}, {stall_timeout}, {start_timeout}, {capacity}")
        self.source = str(name)
        self.fps = float(ANNOTATION_FPS)
        self.hold_seconds, self.stall_timeout = float(hold_seconds), float(stall_timeout)
        self.start_timeout = float(start_timeout)
        self.stop = threading.Event()
        self.gaps: list[LiveGap] = []
        self.reopened = 0
        self.ended: str | None = None
        self.last_index = -1
        self.width = self.height = 0
        self.received = self.overflowed = 0
        self._waiting: deque[tuple[float, float, np.ndarray]] = deque(maxlen=int(capacity))
        self._closed = False
        self._cond = threading.Condition()
        self._stalled = False
        self._origin: float | None = None  # the first frame's arrival: the stream's time 0

    def push(self, pixels: np.ndarray, arrival: float | None = None) -> bool:
        """Add the next frame (``(H, W, 3)`` uint8 RGB; ``arrival``: ``time.monotonic()`` by default);
        False once the source is closed or stopped. Every frame has the first one's size."""
        rgb = np.asarray(pixels)
        if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
            raise ValueError(f"a pushed frame is (H, W, 3) uint8 RGB, got shape {rgb.shape} of {rgb.dtype}")
        with self._cond:
            if self._closed or self.stop.is_set():
                return False
            if self.received and rgb.shape[:2] != (self.height, self.width):
                raise ValueError(f"{self.source}: the frame size changed from {self.width}x{self.height} to "
                                 f"{rgb.shape[1]}x{rgb.shape[0]}; start a new run for the new size")
            self.height, self.width = rgb.shape[:2]
            if len(self._waiting) == self._waiting.maxlen:
                self.overflowed += 1
            arrival = time.monotonic() if arrival is None else float(arrival)
            self._origin = arrival if self._origin is None else self._origin
            self._waiting.append((arrival - self._origin, arrival, rgb))
            self.received += 1
            self._cond.notify_all()
        return True

    def close(self) -> None:
        """No more frames: the frames waiting are still read, then the source ends."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _next(self) -> tuple[float, float, np.ndarray] | None:
        """The oldest waiting frame (stream time, arrival, pixels); None when the source ends (``ended`` says why)."""
        with self._cond:
            wait = self.stall_timeout if self._origin is not None else self.start_timeout
            deadline = time.monotonic() + wait
            while not self._waiting:
                if self.stop.is_set():
                    self.ended = "stopped"
                    return None
                if self._closed:
                    self.ended = f"{self.source}: no more frames"
                    return None
                left = deadline - time.monotonic()
                if left <= 0:
                    self.ended = f"{self.source}: no frame for {wait:g} s"
                    self._stalled = True
                    return None
                self._cond.wait(min(left, 0.1))  # wakes on a push, a close, or to look at stop
            return self._waiting.popleft()

    def grid_frames(self) -> Iterator[LiveFrame | LiveGap]:
        """The grid frames as frames arrive (held frames fill short holes), and the gaps; ends when
        the source is closed, stopped or stalls."""
        next_index, last = 0, None  # last: (time_s, pixels) of the latest frame read
        while (item := self._next()) is not None:
            t, arrival, rgb = item
            t = max(0.0, t)
            index = int(round(t * self.fps))
            self.last_index = max(self.last_index, index)
            if index < next_index:  # faster than the grid: this slot has its frame already
                last = (t, rgb)
                continue
            if last is not None and index > next_index:
                if (index - next_index) / self.fps <= self.hold_seconds:
                    for slot in range(next_index, index):  # the picture held until this frame
                        yield LiveFrame(slot, round(slot / self.fps, 4), arrival, last[1])
                else:
                    self.gaps.append(LiveGap(round(last[0], 4), round(t, 4),
                                             f"no frame from {self.source} for {t - last[0]:.1f} s"))
                    yield self.gaps[-1]
            last = (t, rgb)
            next_index = index + 1
            yield LiveFrame(index, round(t, 4), arrival, rgb)
        if self._stalled and last is not None:
            self.gaps.append(LiveGap(round(last[0], 4), None, self.ended))
            yield self.gaps[-1]


__all__ = ["PushedFrameSource"]
