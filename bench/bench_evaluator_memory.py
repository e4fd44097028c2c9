"""Memory of ``grove evaluate`` at dataset scale: peak resident memory growth of the
evaluation of N clips (ground truth + predictions files), and of reading the ground truth alone.

    PYTHONPATH=. python bench/bench_evaluator_memory.py --clips 100000 --frames 4 --boxes 2
    PYTHONPATH=. python bench/bench_evaluator_memory.py --clips 100000 --frames 4 --boxes 2 --code OLD_CHECKOUT

Each clip is shaped like ``cli.py predict`` output (bench_prediction_memory.py's clips: a caption,
its phrases, ``--boxes`` scored boxes on each of ``--frames`` annotated frames at 5 fps) and its
ground truth holds as many boxes on the same grid. Grounding metrics only (exact phrase match, no
caption metrics: those need Java and measure something else). Every figure comes from a fresh
process (the kernel's peak RSS, VmHWM reset after imports, minus the RSS then). ``--code`` runs the evaluator
of another checkout (e.g. ``git archive`` of an earlier commit) on the same files.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def write_files(folder: Path, clips: int, frames: int, boxes: int, seed: int = 0) -> tuple[Path, Path]:
    """A ground-truth records JSON and a predictions JSON of ``clips`` clips (the predictions are
    the boxes moved by a few pixels, so the metrics are not trivial)."""
    from bench_prediction_memory import write_predictions  # a sibling: bench/ is the script's folder

    pred = write_predictions(folder / "pred.json", clips, frames, boxes, seed)
    data = json.loads(pred.read_text())
    rng = np.random.default_rng(seed + 1)
    records = []
    for key, clip in data.items():
        video_id, clip_id = key.rsplit("_", 1)
        bboxes = [(np.asarray(f["boxes"]) + rng.uniform(-2, 2, (len(f["boxes"]), 4))).round(2).tolist()
                  for f in clip["frames"]]
        records.append({"video_fname": f"{video_id}.mp4", "video_id": video_id, "clip_id": clip_id, "fps": 25.0,
                        "clip_start_frame": 0, "clip_end_frame": 5 * frames - 1, "width": 1000, "height": 1000,
                        "caption": clip["caption"], "tagged_caption": clip["tagged_caption"],
                        "phrases": clip["phrases"], "bboxes": bboxes,
                        "labels": [f["labels"] for f in clip["frames"]]})
    gt = folder / "gt.json"
    gt.write_text(json.dumps({"records": records}))
    return gt, pred


def _rss_now() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_rss() -> int:
    """Peak resident bytes since the last reset (VmHWM)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _measure(gt: str, pred: str, stage: str) -> None:
    """Child process: the peak RSS growth (bytes) of one stage, and the metrics it computed."""
    import core  # noqa: F401

    if Path("metrics/evaluator").is_dir():
        from formats.records import read_ground_truth
        from metrics.evaluator.evaluation import evaluate_files
    elif Path("formats/records.py").is_file():  # a checkout from before metrics/evaluator/
        from formats.records import read_ground_truth
        from metrics.evaluation import evaluate_files
    else:  # a checkout from before the formats/ package
        from metrics.evaluator.evaluation import evaluate_files, read_ground_truth

    # The kernel's high-water mark carries over from the parent through fork and exec (the parent that
    # wrote the files may be large), so it is reset here and read from /proc/self/status.
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _rss_now()
    if stage == "gt":
        records, _ = read_ground_truth(gt)
        out = {"clips": len(records)}
    else:
        report = evaluate_files(gt, pred, text_encoder="exact", caption_metrics=(), capture=False)
        out = {"clips": report["num_clips"], "metrics": report["metrics"]}
    peak = _peak_rss()
    print(json.dumps({**out, "peak_growth_bytes": peak - before}))


def _child(code: Path, gt: Path, pred: Path, stage: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run([sys.executable, __file__, "--measure", str(gt), str(pred), stage],
                          capture_output=True, text=True, env=env, cwd=str(code))
    if done.returncode:
        raise SystemExit(f"the {stage} measurement failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clips", type=int, default=100_000)
    parser.add_argument("--frames", type=int, default=4)
    parser.add_argument("--boxes", type=int, default=2)
    parser.add_argument("--code", default=str(ROOT), help="checkout whose evaluator is measured (default: this one)")
    parser.add_argument("--measure", nargs=3, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        _measure(*args.measure)
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        gt, pred = write_files(Path(tmp), args.clips, args.frames, args.boxes)
        files_mb, pred_mb = (gt.stat().st_size + pred.stat().st_size) / 2**20, pred.stat().st_size / 2**20
        gt_only = _child(Path(args.code), gt, pred, "gt")
        full = _child(Path(args.code), gt, pred, "evaluate")
    row = {"clips": args.clips, "pred_file_mb": round(pred_mb, 1), "files_mb": round(files_mb, 1),
           "gt_read_mb": round(gt_only["peak_growth_bytes"] / 2**20),
           "evaluate_mb": round(full["peak_growth_bytes"] / 2**20), "metrics": full["metrics"]}
    print("| clips | predictions file (MB) | GT + predictions (MB) | reading the GT (MB) | whole evaluation (MB) |")
    print("|---|---|---|---|---|")
    print(f"| {row['clips']} | {row['pred_file_mb']} | {row['files_mb']} | {row['gt_read_mb']} "
          f"| {row['evaluate_mb']} |")
    print(json.dumps({k: round(v, 6) for k, v in full["metrics"].items()}))
    return row


if __name__ == "__main__":
    main()
