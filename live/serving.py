"""A video file served as a live MPEG-TS stream over HTTP on 127.0.0.1, at real-time speed (or faster).

The file's packets are remuxed (not re-encoded) into MPEG-TS once, each packet's end byte noted with
its decoding time; a client is sent the bytes of each packet when the stream's clock reaches it, as a
camera or an encoder would send them. ``die_after_s`` cuts every connection at that stream time and
refuses later ones (a source that dies mid-stream). Used by ``bench/bench_live.py`` and the tests.
"""
from __future__ import annotations

import io
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


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
        start, sent = time.monotonic(), 0
        try:
            for end, t in self.marks:
                if self.die_after_s is not None and t >= self.die_after_s:
                    self.dead.set()
                    return
                if self.speed != float("inf"):
                    wait = start + t / self.speed - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                if end > sent:
                    out.write(self.data[sent:end])
                    out.flush()
                    sent = end
        except (BrokenPipeError, ConnectionResetError):
            pass

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
