"""Memory the evaluator needs to read a predictions file: peak resident memory of
``formats.predictions.load_predictions`` against the file's size, for files of N clips.

    PYTHONPATH=. python bench/bench_prediction_memory.py [--clips 2000 8000] [--frames 40] [--boxes 3]

Each clip is shaped like ``cli.py predict`` output: a caption, its phrases and, per annotated
frame (40 = 8 s at 5 fps), ``--boxes`` boxes with labels and objectness scores. Every size is
measured in a fresh process (peak RSS from ``getrusage``, minus the process's RSS before reading).
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def write_predictions(path: Path, clips: int, frames: int, boxes: int, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    phrases = ["a man", "a red knife", "the wooden board"][:boxes] + [f"object {i}" for i in range(max(0, boxes - 3))]
    out = {}
    for c in range(clips):
        corners = rng.uniform(0, 600, size=(frames, boxes, 2))
        xyxy = np.concatenate([corners, corners + rng.uniform(10, 200, size=(frames, boxes, 2))], axis=-1)
        out[f"video{c:06d}_{c % 9}"] = {
            "caption": "a man cuts a red knife on the wooden board, then puts it down.",
            "tagged_caption": " and ".join(f"<p>{p}</p>" for p in phrases), "phrases": phrases,
            "frames": [{"frame": 5 * f, "boxes": np.round(xyxy[f], 2).tolist(), "labels": phrases,
                        "scores": np.round(rng.uniform(0, 1, boxes), 4).tolist()} for f in range(frames)]}
    path.write_text(json.dumps(out))
    return path


def _measure(path: str) -> None:
    """Child process: print the peak RSS growth (bytes) while reading ``path``."""
    from formats.predictions import load_predictions

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    predictions = load_predictions(path)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"clips": len(predictions), "peak_growth_bytes": peak - before}))


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clips", type=int, nargs="+", default=[2000, 8000])
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--boxes", type=int, default=3)
    parser.add_argument("--measure", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        _measure(args.measure)
        return []
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for clips in args.clips:
            path = write_predictions(Path(tmp) / f"pred_{clips}.json", clips, args.frames, args.boxes)
            child = subprocess.run([sys.executable, __file__, "--measure", str(path)], check=True,
                                   capture_output=True, text=True)
            got = json.loads(child.stdout.strip().splitlines()[-1])
            size = path.stat().st_size
            rows.append({"clips": clips, "file_mb": size / 2**20, "peak_mb": got["peak_growth_bytes"] / 2**20,
                         "ratio": got["peak_growth_bytes"] / size,
                         "kb_per_clip": got["peak_growth_bytes"] / 1024 / clips})
    print("| clips | file (MB) | peak memory (MB) | memory / file size | KB per clip |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['clips']} | {r['file_mb']:.1f} | {r['peak_mb']:.0f} | {r['ratio']:.1f}x "
              f"| {r['kb_per_clip']:.0f} |")
    return rows


if __name__ == "__main__":
    main()
