"""Frames pushed one at a time (the web demo's camera path): their 5-fps grid, held frames in short holes,
gaps in long ones, the end of a stalled source, and a live session run on them."""
import threading
import time

import numpy as np
import pytest

from formats.frame_grids import annotation_grid
from formats.live_source import LiveFrame, LiveGap
from live.pushed_frames import PushedFrameSource
from live.session import LiveSession

T0 = 1000.0  # an arrival clock's origin: only differences count


def frame(value: int, size=(4, 6)) -> np.ndarray:
    return np.full((*size, 3), value, dtype=np.uint8)


def pushed(times, source=None):
    """Frame k (all pixels k) arriving at ``T0 + times[k]``; the source closed after them."""
    source = source or PushedFrameSource(stall_timeout=5.0)
    for k, t in enumerate(times):
        assert source.push(frame(k), arrival=T0 + t)
    source.close()
    return source, list(source.grid_frames())


def slots(items):
    """(grid index, value of the frame shown there) of every grid frame."""
    return [(f.index, int(f.pixels[0, 0, 0])) for f in items if isinstance(f, LiveFrame)]


def test_each_grid_slot_takes_the_first_frame_that_reaches_it():
    _, items = pushed([0.0, 0.05, 0.21, 0.26, 0.41, 0.45, 0.62])
    assert slots(items) == [(0, 0), (1, 2), (2, 4), (3, 6)]
    assert [f.time_s for f in items] == [0.0, 0.21, 0.41, 0.62]
    assert [f.arrival for f in items] == [T0, T0 + 0.21, T0 + 0.41, T0 + 0.62]


def test_a_slow_sender_s_short_holes_hold_the_last_frame():
    _, items = pushed([0.0, 0.33, 0.66, 0.99, 1.32])  # grid indices 0, 2, 3, 5, 7
    assert slots(items) == [(0, 0), (1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (6, 3), (7, 4)]
    held = items[1]
    assert held.time_s == 0.2 and held.arrival == T0 + 0.33  # known once the next frame came


def test_a_long_hole_is_a_gap_and_the_grid_resumes_at_the_frame_after_it():
    source, items = pushed([0.0, 0.2, 2.0, 2.2])
    assert slots(items) == [(0, 0), (1, 1), (10, 2), (11, 3)]
    (gap,) = [g for g in items if isinstance(g, LiveGap)]
    assert items.index(gap) == 2 and (gap.start_s, gap.end_s) == (0.2, 2.0)
    assert gap.reason == "no frame from camera for 1.8 s" and source.gaps == [gap]
    assert source.ended == "camera: no more frames" and source.last_index == 11


def test_a_stalled_source_ends_with_a_gap_not_a_hang():
    source = PushedFrameSource(stall_timeout=0.3)
    source.push(frame(0), arrival=time.monotonic())
    began = time.monotonic()
    items = list(source.grid_frames())
    assert 0.25 <= time.monotonic() - began < 3.0
    assert slots(items) == [(0, 0)] and isinstance(items[-1], LiveGap) and items[-1].end_s is None
    assert source.ended == "camera: no frame for 0.3 s"


def test_the_first_frame_may_take_longer_than_a_stall():
    source = PushedFrameSource(stall_timeout=0.2, start_timeout=0.6)
    began = time.monotonic()
    assert list(source.grid_frames()) == [] and source.gaps == []
    assert 0.55 <= time.monotonic() - began < 3.0 and source.ended == "camera: no frame for 0.6 s"


def test_stop_ends_a_source_waiting_for_frames():
    source = PushedFrameSource(stall_timeout=60.0)
    threading.Timer(0.2, source.stop.set).start()
    began = time.monotonic()
    assert list(source.grid_frames()) == [] and source.ended == "stopped"
    assert time.monotonic() - began < 2.0
    assert source.push(frame(0)) is False  # a stopped source takes no more frames


def test_bad_frames_are_refused_with_a_sentence():
    source = PushedFrameSource()
    with pytest.raises(ValueError, match=r"\(H, W, 3\) uint8 RGB, got shape \(4, 6\) of uint8"):
        source.push(np.zeros((4, 6), np.uint8))
    with pytest.raises(ValueError, match="of float32"):
        source.push(np.zeros((4, 6, 3), np.float32))
    source.push(frame(0))
    with pytest.raises(ValueError, match="the frame size changed from 6x4 to 8x4"):
        source.push(frame(1, size=(4, 8)))


def test_a_reader_far_behind_loses_the_oldest_frames():
    source = PushedFrameSource(capacity=4, stall_timeout=5.0)
    source, items = pushed([0.2 * k for k in range(10)], source)
    assert source.overflowed == 6 and source.received == 10
    assert slots(items) == [(6, 6), (7, 7), (8, 8), (9, 9)]  # on the clock of the first frame pushed


class _KeyOnly:
    """Preprocessing that keeps the clip's key, grid and pixels: the session's scheduling without a model."""

    def sample(self, frames, record):
        return {"key": record.key, "frames": annotation_grid(record.fps, record.clip_start_frame,
                                                             record.clip_end_frame), "pixels": frames}


def _one_box(batch):
    (sample,) = batch
    return {sample["key"]: {"caption": "a square", "tagged_caption": "<p>a square</p>", "phrases": ["a square"],
                            "frames": [{"frame": int(f), "boxes": [[1.0, 1.0, 3.0, 3.0]], "labels": ["a square"],
                                        "scores": [0.9]} for f in sample["frames"]]}}


def test_a_session_cuts_pushed_frames_into_clips_as_a_stream_s():
    source = PushedFrameSource(stall_timeout=5.0)
    session = LiveSession(source, _KeyOnly(), lambda samples: samples, _one_box, clip_seconds=1.0, policy="queue",
                          video_id="camera")
    times = [0.0, 0.33, 0.66, 0.99, 1.32, 1.65, 2.0, 2.2, 2.41, 2.6, 2.79, 3.0]  # grid 0-15, holes held

    def send():
        for k, t in enumerate(times):
            source.push(frame(k), arrival=T0 + t)
        source.close()

    threading.Thread(target=send).start()
    out = list(session.clips())
    records = [record for record, _ in out]
    assert [r["key"] for r in records] == ["camera_0", "camera_1", "camera_2", "camera_3"]
    assert [(r["start_frame"], r["end_frame"]) for r in records] == [(0, 4), (5, 9), (10, 14), (11, 15)]
    assert [r["start_s"] for r in records] == [0.0, 1.0, 2.0, 2.2]  # the last clip aligned to the end
    for record, clip in out:  # the clip handed to the model holds the pixels of its grid frames
        assert clip.clip.frames.tolist() == [f["frame"] for f in record["frames"]]
        assert len(clip.clip.pixels) == 5 and np.array_equal(np.stack(clip.clip.pixels), clip.sample["pixels"])
    assert [int(p[0, 0, 0]) for p in out[0][1].clip.pixels] == [0, 0, 1, 2, 2]  # grid 0-4: two held
    assert all(r["phrases"] == [{"phrase": "a square", "entity": 0}] for r in records)
    timeline = session.timeline()
    assert timeline["fps"] == 5.0 and timeline["num_frames"] == 16 and timeline["path"] == "camera"
    assert session.summary()["ended"] == "camera: no more frames"
