"""``grove live`` like a user runs it: a synthetic long video (known ground truth) served as a live HTTP
stream on 127.0.0.1, written as a growing file, or dying mid-stream; the tiny random model predicts."""
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from formats.frame_grids import annotation_grid
from formats.live_source import LiveFrame, LiveGap, LiveSource
from formats.video_files import probe_video
from formats.video_reader import stream_frames
from live.scheduler import ClipQueue
from live.serving import LiveStreamServer, mpegts_packets, write_growing
from longvideo.clip_records import records_from_truth
from longvideo.clip_scoring import check_segments
from longvideo.scoring import entity_tracks, identity_scores
from longvideo.synthetic_long import LongVideoConfig, generate_long_video
from longvideo.timeline import build_timeline, read_timeline
from tests.webdemo.tiny_model import fit_tiny

FIXED_CAPTION = "A <p>red shape</p> moves past <p>the wall</p>."
CLIP_SECONDS = 2.0


@pytest.fixture(scope="module")
def long_video(tmp_path_factory):
    folder = tmp_path_factory.mktemp("long")
    config = LongVideoConfig(duration_s=12.0, fps=25.0, width=224, height=128, num_objects=3, object_size=(14, 36))
    truth = generate_long_video(folder / "long.mp4", config, clip_seconds=CLIP_SECONDS)
    return folder / "long.mp4", truth


@pytest.fixture(scope="module")
def tiny_ckpt(tiny_synthetic_root, tmp_path_factory):
    return fit_tiny(tiny_synthetic_root, tmp_path_factory.mktemp("tiny_fit"))


@pytest.fixture
def fixed_caption(monkeypatch):
    from models.grove import Grove

    monkeypatch.setattr(Grove, "generate_captions",
                        lambda self, frames, max_new_tokens=64, video_embeds=None: [FIXED_CAPTION] * len(frames))


def grid_reference(video: Path):
    info = probe_video(video)
    return [item for item in stream_frames(info.path, annotation_grid(info.fps, 0, info.num_frames - 1))]


def check_frames(items, reference):
    frames = [f for f in items if isinstance(f, LiveFrame)]
    assert [f.index for f in frames] == [r[0] for r in reference]
    assert all(np.array_equal(f.pixels, r[1]) for f, r in zip(frames, reference))
    arrivals = [f.arrival for f in frames]
    assert arrivals == sorted(arrivals)


def test_http_stream_gives_the_files_grid_frames(long_video):
    video, _ = long_video
    with LiveStreamServer(video, speed=float("inf")) as server:
        source = LiveSource(server.url, reconnects=0)
        items = list(source.grid_frames())
    check_frames(items, grid_reference(video))
    assert source.fps == 25.0 and source.last_index == 299


def test_growing_file_is_followed_to_its_end(long_video, tmp_path):
    video, _ = long_video
    data, _ = mpegts_packets(video)
    growing = tmp_path / "recording.ts"
    writer = write_growing(growing, data, chunk=4096, pause=0.002)
    source = LiveSource(str(growing), follow=True, stall_timeout=1.0)
    items = list(source.grid_frames())
    writer.join()
    check_frames(items, grid_reference(video))


def test_drop_oldest_counts_what_it_pushes_out():
    queue = ClipQueue("drop-oldest", capacity=2)
    for i in range(5):
        queue.put(i)
    queue.close()
    assert queue.dropped == [0, 1, 2]
    assert [queue.get(), queue.get(), queue.get()] == [3, 4, None]


def test_queue_policy_loses_nothing():
    queue = ClipQueue("queue", capacity=1)
    got = []

    def consume():
        while (item := queue.get()) is not None:
            got.append(item)

    consumer = threading.Thread(target=consume)
    consumer.start()
    for i in range(50):
        queue.put(i)
    queue.close()
    consumer.join()
    assert got == list(range(50)) and queue.dropped == []


def run_live(tiny_ckpt, source, out, *extra):
    from command_line.grove import main
    from tests.fixtures.paths import ROOT

    main(["live", str(source), "--config", str(ROOT / "configs" / "demo.yaml"), "--ckpt-path", str(tiny_ckpt),
          "--out", str(out), "--clip-seconds", str(CLIP_SECONDS), "--text-encoder", "exact", "--video-id", "long",
          *extra, "--", "--model.init_args.global_encoder.checkpoint=null",
          "--model.init_args.grounding_encoder.checkpoint=null", "--model.init_args.max_new_tokens=6",
          "--model.init_args.objectness_threshold=0.0"])
    lines = [json.loads(line) for line in (out / "clips.jsonl").read_text().splitlines()]
    return lines, read_timeline(out / "timeline.json")["videos"][0], json.loads((out / "live.json").read_text())


@pytest.mark.slow
def test_live_stream_end_to_end(long_video, tiny_ckpt, tmp_path, fixed_caption):
    video, truth = long_video
    with LiveStreamServer(video, speed=float("inf")) as server:
        lines, timeline, summary = run_live(tiny_ckpt, server.url, tmp_path / "out", "--skip-policy", "queue",
                                            "--reconnects", "0")
    # every clip of the ground truth was emitted, on the truth's frames, in order
    records = {r.key: r for r in records_from_truth(truth, CLIP_SECONDS, video_id="long")}
    assert [line["key"] for line in lines] == list(records) and summary["dropped_clips"] == []
    check_segments(timeline, records, "live")
    for line in lines:
        assert line["latency_s"] >= 0 and line["caption"]
        assert {p["phrase"] for p in line["phrases"]} == {"red shape", "the wall"}
        for frame in line["frames"]:
            assert len(frame["entities"]) == len(frame["boxes"])
    # ids never renumbered: the timeline's ids are the ones emitted, and persistent phrases keep one id
    emitted = [{p["phrase"]: p["entity"] for p in line["phrases"]} for line in lines]
    in_timeline = [{p["phrase"]: p["entity"] for p in s["phrases"]} for s in timeline["segments"]]
    assert emitted == in_timeline
    for phrase in ("red shape", "the wall"):
        longest = max(sum(1 for _ in run) for run in _runs([e[phrase] for e in emitted]))
        assert longest >= 5, f"{phrase}: ids {[e[phrase] for e in emitted]}"
    # the identity measure equals the offline linking of the same clips (the same cues, the timeline builder)
    predictions = json.loads((tmp_path / "out" / "predictions.json").read_text())
    clips = [{"key": s["key"], "clip": s["index"], "shot": s["shot"], "start_frame": s["start_frame"],
              "end_frame": s["end_frame"],
              "frames": list(annotation_grid(25.0, s["start_frame"], s["end_frame"]))}
             for s in timeline["segments"]]
    from longvideo.timeline import text_vectors

    offline = build_timeline(timeline, clips, predictions, text_vectors=text_vectors(predictions, "exact"),
                             weights=None)
    live_scores = identity_scores(truth["frames"], entity_tracks(timeline))
    offline_scores = identity_scores(truth["frames"], entity_tracks(offline))
    assert live_scores["IDF1"] == pytest.approx(offline_scores["IDF1"])


def _runs(values):
    from itertools import groupby

    return [list(g) for _, g in groupby(values)]


@pytest.mark.slow
def test_stream_that_dies_ends_with_what_was_seen(long_video, tiny_ckpt, tmp_path, fixed_caption):
    video, _ = long_video
    with LiveStreamServer(video, speed=float("inf"), die_after_s=7.0) as server:
        lines, timeline, summary = run_live(tiny_ckpt, server.url, tmp_path / "out", "--skip-policy", "queue",
                                            "--reconnects", "1", "--stall-timeout", "1")
    assert 3 <= len(lines) <= 4 and [s["key"] for s in timeline["segments"]] == [line["key"] for line in lines]
    assert timeline["segments"][-1]["end_s"] <= 7.2
    assert summary["reopened"] == 0 and summary["gaps"] and summary["gaps"][-1]["start_s"] < 7.0
    assert timeline["gaps"] == summary["gaps"]


def test_stalled_source_is_a_gap_not_a_hang(tmp_path):
    source = LiveSource("http://127.0.0.1:9/none.ts", reconnects=1, backoff=0.01, stall_timeout=0.5)
    assert [i for i in source.grid_frames() if not isinstance(i, LiveGap)] == []
    assert source.ended.startswith("cannot open")


def test_overlapping_clips_come_as_their_last_frame_arrives():
    from longvideo.segments import ClipPlanner

    planner = ClipPlanner(4, stride_frames=2)
    emitted = {i: [c.frames.tolist() for c in planner.push(i, np.zeros((2, 2, 3), np.uint8))] for i in range(9)}
    assert {i: c for i, c in emitted.items() if c} == {3: [[0, 1, 2, 3]], 5: [[2, 3, 4, 5]], 7: [[4, 5, 6, 7]]}
    assert [c.frames.tolist() for c in planner.close()] == [[5, 6, 7, 8]]


class _KeyOnly:
    """Preprocessing that keeps the clip's key and frames: the session's scheduling without a model."""

    def sample(self, frames, record):
        grid = annotation_grid(record.fps, record.clip_start_frame, record.clip_end_frame)
        return {"key": record.key, "frames": grid}


def _fixed_prediction(batch):
    (sample,) = batch
    boxes = {"frames": [{"frame": int(f), "boxes": [[10.0, 10.0, 40.0, 40.0]], "labels": ["a square"],
                         "scores": [0.9]} for f in sample["frames"]]}
    return {sample["key"]: {"caption": "a square", "tagged_caption": "<p>a square</p>", "phrases": ["a square"],
                            **boxes}}


def test_stopped_run_keeps_everything_emitted(long_video):
    from live.session import LiveSession

    video, _ = long_video
    with LiveStreamServer(video, speed=float("inf")) as server:
        session = LiveSession(LiveSource(server.url, reconnects=0), _KeyOnly(), lambda samples: samples,
                              _fixed_prediction, clip_seconds=1.0, policy="queue")
        emitted = []
        for line in session.run():
            emitted.append(line)
            if len(emitted) == 3:
                session.stop()  # what Ctrl-C and SIGTERM do
    timeline = session.timeline()
    assert 3 <= len(emitted) < 12
    assert [s["key"] for s in timeline["segments"]] == [line["key"] for line in emitted]
    assert [e["id"] for e in timeline["entities"]] == [0]  # one square, one id, in every clip
    assert all(line["phrases"] == [{"phrase": "a square", "entity": 0}] for line in emitted)
    assert session.summary()["ended"] == "stopped"


def test_the_source_thread_ends_with_the_run(long_video):
    """It preprocesses with torch, and GNU OpenMP slowed the model thread's parallel ops once such a
    thread exited, so it waits for the run's end: the last clip (5-s clips of a 12-s stream: 0-5,
    5-10, then 7-12 cut once the source ended) is predicted while it is still there; then it ends."""
    from live.session import LiveSession

    video, _ = long_video
    seen = []

    def predict(batch):
        seen.append((session.source.ended is not None, session._thread.is_alive()))
        return _fixed_prediction(batch)

    with LiveStreamServer(video, speed=float("inf")) as server:
        session = LiveSession(LiveSource(server.url, reconnects=0), _KeyOnly(), lambda samples: samples, predict,
                              clip_seconds=5.0, policy="queue")
        lines = list(session.run())
    assert [line["start_s"] for line in lines] == [0.0, 5.0, 7.0] and seen[-1] == (True, True)
    session._thread.join(timeout=30.0)
    assert not session._thread.is_alive()


def test_stdin_is_a_source(long_video, tmp_path, monkeypatch):
    import io
    import sys

    video, _ = long_video
    data, _ = mpegts_packets(video)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(data))))
    source = LiveSource("-")
    check_frames(list(source.grid_frames()), grid_reference(video))
