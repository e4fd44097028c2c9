"""``grove live`` on a live stream: per-clip latency, real-time factor, dropped clips, memory over time.

    PYTHONPATH=. python bench/bench_live.py --ckpt runs/demo/version_0/checkpoints/best-*.ckpt \\
        [--minutes 2] [--clip-seconds 8] [--skip-policy drop-oldest]

A long synthetic video at the demo's scale (224x128 at 25 fps, ``grove synthetic-long``) is served on
127.0.0.1 as an MPEG-TS stream over HTTP at real-time speed (``live.serving.LiveStreamServer``:
each packet sent when the stream's clock reaches it), and ``grove live`` reads it in a child process.
From its ``clips.jsonl``: latency (the clip's last grid frame arriving to its line being written)
p50 / p95 / max, the real-time factor (clip stride over the mean model time per clip: at 1 or more
the model keeps up with the stream), clips dropped; the child's RSS is sampled every second.
Also printed: the released GROVE's FLOPs for one 8-s clip, counting every window of the clip
(``sizing.flops``, ``models.grove.windows``), and the streams one H100 holds at 40 % MFU.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

H100_BF16_PEAK = 989e12  # dense BF16 tensor-core FLOP/s of an H100 SXM
MFU = 0.4


def streams_per_h100(clip_seconds: float, stride_seconds: float, window_mode: str = "interleaved") -> str:
    from sizing.flops import grove_clip_flops

    clip = grove_clip_flops(grid_frames=int(round(clip_seconds * 5)), window_mode=window_mode)
    seconds = clip.seconds_per_clip(H100_BF16_PEAK, MFU)
    return (f"released GROVE: {clip.num_windows} windows of 8 frames per {clip_seconds:g}-s clip ({window_mode}) "
            f"and one caption, {clip.total / 1e12:.1f} TFLOP per clip; one H100 at {MFU:.0%} MFU: "
            f"{seconds:.2f} s per clip, {stride_seconds / seconds:.1f} streams at a {stride_seconds:g}-s stride")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--config", default=str(ROOT / "configs" / "demo.yaml"))
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--clip-seconds", type=float, default=8.0)
    parser.add_argument("--skip-policy", default="drop-oldest")
    parser.add_argument("--speed", type=float, default=1.0, help="stream seconds per wall second")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    print(streams_per_h100(args.clip_seconds, args.clip_seconds))
    import psutil

    from live.serving import LiveStreamServer
    from longvideo.synthetic_long import LongVideoConfig, generate_long_video

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        video = out / "live_bench.mp4"
        config = LongVideoConfig(duration_s=60 * args.minutes, fps=25, width=224, height=128, object_size=(14, 36))
        generate_long_video(video, config, clip_seconds=args.clip_seconds)
        with LiveStreamServer(video, speed=args.speed) as server:
            cmd = [sys.executable, "-c", "import sys; from command_line.grove import main; main(sys.argv[1:])",
                   "live", server.url, "--config", args.config, "--ckpt-path", args.ckpt, "--out", str(out / "live"),
                   "--clip-seconds", str(args.clip_seconds), "--skip-policy", args.skip_policy, "--reconnects", "0"]
            child = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
            rss, began = [], time.monotonic()
            process = psutil.Process(child.pid)
            while child.poll() is None:
                try:
                    rss.append((time.monotonic() - began, process.memory_info().rss / 2 ** 20))
                except psutil.NoSuchProcess:
                    break
                time.sleep(1.0)
            stderr = child.stderr.read()
        if child.returncode:
            raise SystemExit(f"grove live failed:\n{stderr[-3000:]}")
        lines = [json.loads(line) for line in (out / "live" / "clips.jsonl").read_text().splitlines()]
        summary = json.loads((out / "live" / "live.json").read_text())
    latency = np.array([line["latency_s"] for line in lines])
    model = np.array([line["model_s"] for line in lines])
    print(f"{args.minutes:g} min stream at {args.speed:g}x, {args.clip_seconds:g}-s clips, {args.skip_policy}: "
          f"{len(lines)} clips predicted, {len(summary['dropped_clips'])} dropped")
    print(f"latency s: p50 {np.percentile(latency, 50):.2f}, p95 {np.percentile(latency, 95):.2f}, "
          f"max {latency.max():.2f}; model s per clip: mean {model.mean():.2f}; "
          f"real-time factor {args.clip_seconds / model.mean():.2f}")
    marks = [r for r in rss if r[0] >= 20]  # after the model has loaded
    if marks:
        picks = [marks[int(i)] for i in np.linspace(0, len(marks) - 1, min(8, len(marks)))]
        print("RSS MiB over time: " + ", ".join(f"{t:.0f}s {m:.0f}" for t, m in picks))


if __name__ == "__main__":
    main()
