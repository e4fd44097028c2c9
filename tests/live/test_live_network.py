"""Live network sources as cameras and encoders send them, all on 127.0.0.1: MPEG-TS over UDP and TCP
(connecting, or listening while an encoder pushes), RTSP published to a listening source, and a TCP
server that goes down mid-stream and comes back, or never does. The frames must be the offline
reader's on the finished file (``tests/live/test_live.py``'s helpers)."""
import time

import numpy as np
import pytest

from formats.live_source import LiveFrame, LiveGap, LiveSource
from formats.video_files import probe_video
from formats.video_reader import stream_frames
from live.serving import (
    TcpStreamServer,
    free_port,
    push_when_listening,
    rtsp_pusher,
    tcp_pusher,
    udp_sender,
)
from longvideo.synthetic_long import LongVideoConfig, generate_long_video
from tests.live.test_live import check_frames, grid_reference

SPEED = 4.0  # stream seconds per wall second: paced as a live sender, faster than real time


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    path = tmp_path_factory.mktemp("network") / "long.mp4"
    generate_long_video(path, LongVideoConfig(duration_s=10.0, fps=25.0, width=224, height=128, num_objects=3,
                                              object_size=(14, 36)), clip_seconds=2.0)
    return path


@pytest.fixture(scope="module")
def reference(video):
    return grid_reference(video)


def frames_of(items):
    return [item for item in items if isinstance(item, LiveFrame)]


def test_udp_stream_gives_the_files_grid_frames(video, reference):
    port = free_port("udp")
    sender = push_when_listening(port, udp_sender(video, port, SPEED), kind="udp")
    source = LiveSource(f"udp://127.0.0.1:{port}", reconnects=0, stall_timeout=1.0)
    items = list(source.grid_frames())
    sender.join()
    check_frames(items, reference)
    # UDP has no end: the stream is over when nothing came for the stall timeout
    assert source.ended == "no data for 1 s" and source.fps == 25.0


@pytest.mark.parametrize("side", ["source connects", "source listens"])
def test_tcp_stream_gives_the_files_grid_frames(video, reference, side):
    if side == "source connects":
        with TcpStreamServer(video, speed=SPEED) as server:
            source = LiveSource(server.url, reconnects=0, stall_timeout=2.0)
            items = list(source.grid_frames())
        assert server.served == 1
    else:
        port = free_port()
        pusher = push_when_listening(port, tcp_pusher(video, port, SPEED))
        source = LiveSource(f"tcp://127.0.0.1:{port}", reconnects=0, stall_timeout=2.0, listen=20.0)
        items = list(source.grid_frames())
        pusher.join()
    check_frames(items, reference)
    assert source.ended == "the stream ended"


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_rtsp_published_to_a_listening_source(video, reference, transport):
    # RTSP gives the first frame no presentation time (it comes before the first RTCP sender
    # report); it still has index 0 and the file's first pixels
    port = free_port()
    url = f"rtsp://127.0.0.1:{port}/live"
    pusher = push_when_listening(port, rtsp_pusher(video, url, SPEED, transport))
    source = LiveSource(url, reconnects=0, stall_timeout=2.0, listen=20.0)
    items = list(source.grid_frames())
    pusher.join()
    check_frames(items, reference)
    assert source.ended == "the stream ended"


def test_nobody_publishing_is_reported_not_waited_for():
    source = LiveSource(f"rtsp://127.0.0.1:{free_port()}/live", reconnects=0, stall_timeout=0.5, listen=1.0)
    assert list(source.grid_frames()) == []
    assert source.ended == "cannot open: nothing connected within 1.5 s"


def test_listening_is_for_rtsp_and_tcp():
    with pytest.raises(ValueError, match="listening is for rtsp:// and tcp:// sources, not 'http://"):
        LiveSource("http://127.0.0.1:8000/stream.ts", listen=5.0)


def test_stream_that_comes_back_continues_its_clock(video):
    """The server cuts the stream at 4 s, is down for 1 s (connections refused), then serves it again
    from its start (a restarted encoder); then it is gone."""
    info = probe_video(video)
    every = dict(stream_frames(info.path, range(info.num_frames)))
    down_s = 1.0
    with TcpStreamServer(video, speed=SPEED, serves=2, cut_after_s=4.0, down_s=down_s) as server:
        source = LiveSource(server.url, reconnects=3, backoff=0.25, stall_timeout=2.0)
        items = list(source.grid_frames())
    gaps = [item for item in items if isinstance(item, LiveGap)]
    assert len(gaps) == 2, gaps
    cut, end = gaps
    before = frames_of(items[:items.index(cut)])
    after = frames_of(items[items.index(cut):items.index(end)])
    # up to the cut: the file's grid frames before 4 s
    assert [f.index for f in before] == list(range(0, 100, 5))
    assert all(np.array_equal(f.pixels, every[f.index]) for f in before)
    # the gap: from the last frame decoded before the cut to the first after the reopening, which
    # waited out the second the server was down (backoff 0.25, 0.5, 1 s: refused, refused, served)
    assert cut.start_s == pytest.approx(99 / 25) and cut.reason == "the stream ended"
    assert cut.end_s - cut.start_s >= down_s / 2
    assert source.reopened == 1 and server.served == 2
    # after it: the clock continues from the gap's end, on the 5-fps grid, and the frames are the
    # restarted stream's from its start (frame k of it at the gap's end + k / 25 s)
    first = round(cut.end_s * 25)
    assert after[0].index == -(-first // 5) * 5
    assert [f.index for f in after] == list(range(after[0].index, first + info.num_frames, 5))
    assert all(f.time_s >= cut.end_s - 1e-3 and f.index == round(f.time_s * 25) for f in after)
    assert all(np.array_equal(f.pixels, every[f.index - first]) for f in after)
    # then the server is gone: three reopenings refused, and the source ends, saying so
    assert server.refused == 3
    assert end.end_s is None and end.start_s == pytest.approx(cut.end_s + (info.num_frames - 1) / 25, abs=1e-3)
    assert source.ended.startswith("cannot open: InvalidDataError") and end.reason == source.ended


def test_out_of_reconnects_it_ends_and_says_so(video, reference):
    began = time.monotonic()
    with TcpStreamServer(video, speed=float("inf"), cut_after_s=3.0) as server:
        source = LiveSource(server.url, reconnects=2, backoff=0.1, stall_timeout=2.0)
        items = list(source.grid_frames())
    assert time.monotonic() - began < 120  # it returns; nothing waits without a bound
    check_frames(items, reference[:15])  # the grid frames before 3 s
    assert isinstance(items[-1], LiveGap) and items[-1].end_s is None
    assert server.refused == 2 and source.reopened == 0
    assert source.ended.startswith("cannot open") and items[-1].reason == source.ended
