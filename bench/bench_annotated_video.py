"""The annotated MP4 of ``predict`` (callbacks.annotated_video.render_annotated_video): CPU and
wall seconds per 8-s clip, and where they go (decoding, caption and box layout, compositing, H.264
encoding), on camera-like 455x256 25-fps content with three labelled boxes per grid frame and a
two-line caption per clip.

    PYTHONPATH=. python bench/bench_annotated_video.py [--seconds 16]

The parts are cProfile's cumulative times of the calls named in PARTS; run it on two checkouts to
compare them (the profile's overhead is included in both).
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from bench_predict import make_video

from callbacks.annotated_video import ClipPrediction, render_annotated_video
from formats.video_reader import PyAVVideoSource

CLIP_FRAMES, GRID_STEP = 200, 5
CAPTION = "A man in a red shirt walks past a dog and a bicycle on the street while a woman watches them go by"
PARTS = {  # part -> function names (file suffix, name) whose cumulative time it is
    "decode": [("video_reader.py", "read_frames"), ("video_reader.py", "stream")],
    "layout and drawing": [("drawing.py", "render_overlay")],
    "compositing": [("drawing.py", "composite"), ("yuv_compositing.py", "prepare_overlay"),
                    ("yuv_compositing.py", "blend_yuv")],
    "encode": [("video_writer.py", "write"), ("video_writer.py", "write_yuv"), ("video_writer.py", "close")],
}


def clips_of(num_frames: int) -> list[ClipPrediction]:
    clips = []
    for start in range(0, num_frames - CLIP_FRAMES + 1, CLIP_FRAMES):
        grid = np.arange(start, start + CLIP_FRAMES, GRID_STEP)
        frames = [{"frame": int(g), "labels": ["a man", "a dog", "a bicycle"],
                   "boxes": [[10 + k, 20, 120 + k, 200], [200, 60, 330, 220], [340, 100, 440, 240]]}
                  for k, g in enumerate(grid)]
        prediction = {"caption": CAPTION, "phrases": ["a man", "a dog", "a bicycle"], "frames": frames}
        record = SimpleNamespace(frame_indices=grid, clip_start_frame=start, clip_end_frame=start + CLIP_FRAMES - 1)
        clips.append(ClipPrediction(record, prediction))
    return clips


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        video = make_video(Path(tmp) / "in.mp4", args.seconds, np.random.default_rng(0))
        with PyAVVideoSource(video) as source:
            clips = clips_of(source.num_frames)
            profile = cProfile.Profile()
            cpu, wall = time.process_time(), time.perf_counter()
            profile.runcall(render_annotated_video, source, Path(tmp) / "out.mp4", clips, 0,
                            len(clips) * CLIP_FRAMES - 1, source.fps)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    stats = pstats.Stats(profile).stats
    n = len(clips)
    print(f"{n} clips of 8 s, 455x256: {cpu / n:.2f} CPU-s and {wall / n:.2f} wall-s per clip")
    for part, names in PARTS.items():
        seconds = sum(ct for (file, _, name), (_, _, _, ct, _) in stats.items()
                      if any(file.endswith(f) and name == fn for f, fn in names))
        print(f"  {part:20s} {seconds / n:6.2f} wall-s per clip")


if __name__ == "__main__":
    main()
