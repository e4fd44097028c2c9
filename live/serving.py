"""A video file served as a live MPEG-TS stream on 127.0.0.1, at real-time speed (or faster), the ways
cameras and encoders send one: over HTTP (:class:`LiveStreamServer`), over TCP from a server that can
go down and come back (:class:`TcpStreamServer`), as UDP datagrams (:func:`udp_sender`), or pushed
to a reader that listens (:func:`tcp_pusher`, :func:`rtsp_pusher`, started by :func:`push_when_listening`).

The file's packets are remuxed (not re-encoded) into MPEG-TS once, each packet's end byte noted with
its decoding time; the bytes of each packet are sent when the stream's clock reaches it
(:func:`paced`). Used by ``bench/bench_live.py`` and the tests.
"""
from __future__ import annotations

import io
import math
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Iterator

Marks = list[tuple[int, float]]
TS_DATAGRAM = 7 * 188  # seven MPEG-TS packets: the usual UDP payload, under a 1500-byte MTU


def mpegts_packets(path: str | Path) -> tuple[bytes, list[tuple[int, float]]]:
    """The file's video stream remuxed into MPEG-TS, and ``(end byte, decoding time s)`` per packet."""
    import av

    buffer = io.BytesIO()
    marks: list[tuple[int, float]] = []
    with av.open(str(path)) as source, av.open(buffer, mode="w", format="mpegts") as sink:
        stream = source.streams.video[0]
        out = sink.add_stream_from_template(stream) if hasattr(sink, "add_stream_from_template") \
            else sink.add_stream(template=stream)
        first = None
        for packet in source.demux(stream):
            if packet.dts is None:
                continue
            t = float(packet.dts * packet.time_base)
            first = t if first is None else first
            packet.stream = out
            sink.mux(packet)
            marks.append((buffer.tell(), t - first))
    data = buffer.getvalue()
    return data, [(min(end, len(data)), t) for end, t in marks] + [(len(data), marks[-1][1] if marks else 0.0)]


def paced(data: bytes, marks: Marks, speed: float = 1.0, stop_at: float | None = None,
          chunk: int | None = None) -> Iterator[bytes]:
    """``data`` in order, each packet's bytes once the stream's clock (``speed`` stream seconds per wall
    second, ``inf``: at once) reaches its time; pieces of at most ``chunk`` bytes; nothing from the
    first packet at or after stream time ``stop_at`` on."""
    start, sent = time.monotonic(), 0
    for end, t in marks:
        if stop_at is not None and t >= stop_at:
            return
        if speed != float("inf"):
            wait = start + t / speed - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        while sent < end:
            upto = end if chunk is None else min(end, sent + chunk)
            yield data[sent:upto]
            sent = upto


class LiveStreamServer:
    """``with LiveStreamServer(video, speed=1.0) as server: server.url``: the video as a live HTTP stream.

    Args:
        speed: stream seconds per wall second (``float('inf')``: as fast as the client reads).
        die_after_s: stream time at which connections are cut and the server stops accepting.
    """

    def __init__(self, video: str | Path, speed: float = 1.0, die_after_s: float | None = None):
        self.data, self.marks = mpegts_packets(video)
        self.speed, self.die_after_s = float(speed), die_after_s
        self.dead = threading.Event()
        self.connections = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                if owner.dead.is_set():
                    self.send_error(503, "the stream has ended")
                    return
                owner.connections += 1
                self.send_response(200)
                self.send_header("Content-Type", "video/mp2t")
                self.end_headers()
                owner.send(self.wfile)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/stream.ts"

    def send(self, out) -> None:
        try:
            for piece in paced(self.data, self.marks, self.speed, self.die_after_s):
                out.write(piece)
                out.flush()
        except (BrokenPipeError, ConnectionResetError):
            return
        if self.die_after_s is not None and self.die_after_s <= self.marks[-1][1]:
            self.dead.set()

    def __enter__(self) -> "LiveStreamServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def write_growing(path: str | Path, data: bytes, chunk: int = 1 << 16, pause: float = 0.0) -> threading.Thread:
    """Append ``data`` to ``path`` in chunks from a thread (a recorder still writing the file)."""
    def writer():
        with open(path, "ab") as f:
            for i in range(0, len(data), chunk):
                f.write(data[i:i + chunk])
                f.flush()
                if pause:
                    time.sleep(pause)

    Path(path).write_bytes(b"")
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    return thread


class TcpStreamServer:
    """``with TcpStreamServer(video) as server: server.url`` (``tcp://127.0.0.1:PORT``): the video as a live
    MPEG-TS stream over TCP; each connection is sent the stream from its start, paced by :func:`paced`.

    Args:
        speed: stream seconds per wall second.
        serves: how many connections get the stream; later ones are accepted and closed at once (the
            source is gone), counted in ``refused``.
        cut_after_s: stream time at which the first connection is cut (None: sent whole).
        down_s: wall seconds the server is down after its first connection (the listening socket
            closed, so connecting is refused), before it listens again on the same port; None: never down.
    """

    def __init__(self, video: str | Path, speed: float = 1.0, serves: int = 1, cut_after_s: float | None = None,
                 down_s: float | None = None):
        self.data, self.marks = mpegts_packets(video)
        self.speed, self.serves, self.cut_after_s, self.down_s = float(speed), int(serves), cut_after_s, down_s
        self.listener = self._listen(0)
        self.port = self.listener.getsockname()[1]
        self.served = self.refused = 0
        self.closing = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    @staticmethod
    def _listen(port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the port again, past TIME_WAIT
        sock.bind(("127.0.0.1", port))
        sock.listen(4)
        sock.settimeout(0.1)  # so that closing is seen
        return sock

    def _serve(self) -> None:
        while not self.closing.is_set():
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:  # the listener was closed
                return
            first = self.served == 0
            with conn:
                if self.served >= self.serves:
                    self.refused += 1
                    continue
                self.served += 1
                conn.settimeout(30.0)
                try:
                    for piece in paced(self.data, self.marks, self.speed, self.cut_after_s if first else None):
                        conn.sendall(piece)
                except OSError:  # the reader went away
                    pass
            if first and self.down_s is not None:
                self.listener.close()
                if self.closing.wait(self.down_s):
                    return
                self.listener = self._listen(self.port)

    def __enter__(self) -> "TcpStreamServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.closing.set()
        self.thread.join(timeout=5.0)
        self.listener.close()


def free_port(kind: str = "tcp") -> int:
    """A port on 127.0.0.1 free now, for a reader that listens on it."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM if kind == "udp" else socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def listening(port: int, kind: str = "tcp") -> bool:
    """Whether a socket on this machine listens on ``port`` (``kind``: ``tcp`` or ``udp``, bound)."""
    import psutil

    return any(c.laddr and c.laddr.port == port and (kind == "udp" or c.status == psutil.CONN_LISTEN)
               for c in psutil.net_connections(kind))


def push_when_listening(port: int, push: Callable[[], None], kind: str = "tcp",
                        wait_s: float = 30.0) -> threading.Thread:
    """A started thread that calls ``push`` once a reader listens on ``port`` (a sender started earlier
    would lose the stream's start); it gives up after ``wait_s`` s without a listener."""
    def run():
        deadline = time.monotonic() + wait_s
        while not listening(port, kind):
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)
        push()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def udp_sender(video: str | Path, port: int, speed: float = 1.0) -> Callable[[], None]:
    """``push``: the video as MPEG-TS in UDP datagrams of seven packets to 127.0.0.1:``port``."""
    data, marks = mpegts_packets(video)

    def push():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for piece in paced(data, marks, speed, chunk=TS_DATAGRAM):
                sock.sendto(piece, ("127.0.0.1", port))

    return push


def tcp_pusher(video: str | Path, port: int, speed: float = 1.0) -> Callable[[], None]:
    """``push``: connect to 127.0.0.1:``port`` and send the video as MPEG-TS (an encoder pushing to
    ``tcp://...?listen=1``), then close."""
    data, marks = mpegts_packets(video)

    def push():
        with socket.create_connection(("127.0.0.1", port), timeout=30.0) as sock:
            for piece in paced(data, marks, speed):
                sock.sendall(piece)

    return push


def rtsp_pusher(video: str | Path, url: str, speed: float = 1.0, transport: str = "tcp") -> Callable[[], None]:
    """``push``: publish the video to ``url`` with RTSP (ANNOUNCE and RECORD, RFC 2326, 10.3 and 10.11)
    and RTP over ``transport`` (``tcp``: interleaved; ``udp``), not re-encoded, read at ``speed`` x.

    It is the ffmpeg binary of the imageio-ffmpeg wheel, a separate process: a PyAV writer in the
    reader's process stalls both, since PyAV writes the header (RTSP's handshake, which waits on the
    reader) holding Python's lock, which the reader's timeout callback needs."""
    import imageio_ffmpeg

    cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-nostdin",
           *(["-readrate", f"{speed:g}"] if math.isfinite(speed) else []), "-i", str(video), "-map", "0:v:0",
           "-c", "copy", "-f", "rtsp", "-rtsp_transport", transport, url]

    def push():
        subprocess.run(cmd, capture_output=True, timeout=600, check=False)

    return push
