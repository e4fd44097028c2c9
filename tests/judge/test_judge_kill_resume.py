"""``grove judge score`` killed with SIGKILL mid-run, then run again with the same arguments: the
rows scored before the kill are reused (never asked again), a line torn by the kill is dropped and
its pair redone, and the final file holds each pair once, equal to an uninterrupted run's file."""
import json
import os
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.fixtures.paths import ROOT

KILL_AT_REQUEST = 9  # the kill lands while the fifth batch of two is being scored


def _answer(caption: str) -> str:
    """A readable score for most captions, prose (an unparsable answer) for every fifth."""
    number = int(caption.rsplit(" ", 1)[-1])
    return "it looks fine to me" if number % 5 == 4 else f"{1 + number % 5}\n\nThe caption is explained."


class _Server:
    """An OpenAI-compatible endpoint answering :func:`_answer`; it can SIGKILL a client process on its
    ``kill_at``-th request (before answering it), as a kill at an arbitrary moment would."""

    def __init__(self):
        self.asked: list[str] = []
        self.victim: subprocess.Popen | None = None
        self.kill_at: int | None = None
        lock, server = threading.Lock(), self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802  (the http.server hook's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                text = body["messages"][1]["content"][-1]["text"]
                caption = text.split("<caption>", 1)[1].split("</caption>", 1)[0]
                with lock:
                    server.asked.append(caption)
                    if server.kill_at is not None and len(server.asked) == server.kill_at:
                        os.kill(server.victim.pid, signal.SIGKILL)
                reply = json.dumps({"choices": [{"message": {"role": "assistant",
                                                             "content": _answer(caption)}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@pytest.fixture()
def server():
    s = _Server()
    yield s
    s.httpd.shutdown()


def _score(server, pairs, out, video_root, kill_at=None) -> int:
    command = [sys.executable, "-m", "judge", "score", "--endpoint", server.url, "--endpoint-model", "judge",
               "--pairs", str(pairs), "--out", str(out), "--video-root", str(video_root), "--num-frames", "2",
               "--batch-size", "2", "--concurrency", "1", "--no-progress", "--threads", "1"]
    server.kill_at = None if kill_at is None else len(server.asked) + kill_at
    server.victim = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, err = server.victim.communicate(timeout=300)
    assert server.victim.returncode == (-signal.SIGKILL if kill_at else 0), err.decode()[-2000:]
    return server.victim.returncode


def _lines(path):
    return path.read_text().splitlines()


@pytest.mark.slow
def test_a_killed_score_run_resumes_exactly(tiny_synthetic_root, tmp_path, server):
    videos = sorted(p.name for p in (tiny_synthetic_root / "videos").glob("*.mp4"))
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"key": f"p{n}", "video": videos[n % len(videos)],
                                         "caption": f"a red circle moves number {n}"}) + "\n" for n in range(20)))
    reference = tmp_path / "reference.jsonl"
    _score(server, pairs, reference, tiny_synthetic_root / "videos")
    expected = _lines(reference)
    assert len(expected) == 20 and [json.loads(r)["key"] for r in expected] == [f"p{n}" for n in range(20)]

    out = tmp_path / "out.jsonl"
    _score(server, pairs, out, tiny_synthetic_root / "videos", kill_at=KILL_AT_REQUEST)
    before_kill = [json.loads(line) for line in _lines(out)]
    assert 0 < len(before_kill) < 20  # killed mid-run, after some batches were written
    with out.open("a") as f:  # as a kill in the middle of writing a row leaves it: half a line, no newline
        f.write(expected[len(before_kill)][:40])
    kept = {r["caption"] for r in before_kill if r["error"] is None}
    asked_before = len(server.asked)
    _score(server, pairs, out, tiny_synthetic_root / "videos")
    asked_again = server.asked[asked_before:]
    all_captions = {f"a red circle moves number {n}" for n in range(20)}
    # scored rows are reused, never asked again; everything else (failed, torn, never reached) is asked once
    assert sorted(asked_again) == sorted(all_captions - kept)
    assert _lines(out) == expected  # each pair once, as an uninterrupted run writes it
