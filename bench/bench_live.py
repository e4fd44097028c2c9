"""``grove live`` on a live stream: per-clip latency, real-time factor, dropped clips, memory over time.

    PYTHONPATH=. python bench/bench_live.py [--ckpt runs/demo/version_0/checkpoints/best-*.ckpt] \\
        [--minutes 2] [--clip-seconds 8] [--skip-policy drop-oldest] [--out DIR]

A long synthetic video at the demo's scale (224x128 at 25 fps, ``grove synthetic-long``) is served on
127.0.0.1 as an MPEG-TS stream over HTTP at real-time speed (``live.serving.LiveStreamServer``:
each packet sent when the stream's clock reaches it), and ``grove live`` reads it in a child process.
From its ``clips.jsonl``: latency (the clip's last grid frame arriving to its line being written)
p50 / p95 / max, the real-time factor (clip stride over the mean model time per clip: at 1 or more
the model keeps up with the stream), clips dropped; the child's RSS is sampled every second
(with ``--out``, the samples are kept in ``DIR/rss.json``).

Without ``--ckpt`` the model is configs/demo.yaml with randomly initialised weights (the towers' and
the model's initial weights, as ``bench/bench_predict.py`` runs it), doing a trained one's work per
clip: an untrained language model tags almost no phrase, and a clip without phrases skips every
grounding window (``models.grove.modeling.Grove.predict``), so each caption is generated (the whole
``max_new_tokens``: an untrained model rarely stops early, so somewhat more steps than a trained
one's) and then replaced by the next clip's true tagged caption from the ground truth, whose
phrases are grounded in every window, boxed and linked as a trained model's would be.
Also printed: the released GROVE's FLOPs for one 8-s clip, counting every window of the clip
(``sizing.flops``, ``models.grove.windows``), and the streams one H100 holds at 40 % MFU.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

# The child: ``grove live``, with argv[1] the ground truth's clip records whose tagged captions
# replace the generated ones (random weights), or "-" (a checkpoint: its own captions).
CHILD = """
import itertools, json, sys
from command_line.grove import main
records = sys.argv.pop(1)
if records != "-":
    from models.grove import Grove
    truth = itertools.cycle([r["tagged_caption"] for r in json.load(open(records))["records"]])
    generate = Grove.generate_captions
    def generate_then_true(self, frames, *args, **kwargs):
        generate(self, frames, *args, **kwargs)
        return [next(truth) for _ in range(len(frames))]
    Grove.generate_captions = generate_then_true
main(sys.argv[1:])
"""
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
    parser.add_argument("--ckpt", default=None, help="the demo checkpoint (default: random demo-size weights)")
    parser.add_argument("--config", default=str(ROOT / "configs" / "demo.yaml"))
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--clip-seconds", type=float, default=8.0)
    parser.add_argument("--skip-policy", default="drop-oldest")
    parser.add_argument("--speed", type=float, default=1.0, help="stream seconds per wall second")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    print(streams_per_h100(args.clip_seconds, args.clip_seconds))
    weights = ["--ckpt-path", args.ckpt] if args.ckpt else []
    if not args.ckpt:  # the towers' init-time files come from `grove pretrain-towers`: random towers instead
        weights += ["--", "--model.init_args.global_encoder.checkpoint=null",
                    "--model.init_args.grounding_encoder.checkpoint=null"]
        print("no --ckpt: configs/demo.yaml with random weights; each caption is generated (max_new_tokens), "
              "then replaced by the clip's true one, whose phrases are grounded: a trained model's work per clip")
    import psutil

    from live.serving import LiveStreamServer
    from longvideo.synthetic_long import LongVideoConfig, generate_long_video

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        video = out / "live_bench.mp4"
        config = LongVideoConfig(duration_s=60 * args.minutes, fps=25, width=224, height=128, object_size=(14, 36))
        generate_long_video(video, config, clip_seconds=args.clip_seconds)
        log = out / "live.log"  # the child's stderr: a file, so a long run never fills a pipe
        with LiveStreamServer(video, speed=args.speed) as server, open(log, "w") as stderr:
            records = "-" if args.ckpt else str(video.with_name(f"{video.stem}_clips.json"))
            cmd = [sys.executable, "-c", CHILD, records,
                   "live", server.url, "--config", args.config, "--out", str(out / "live"),
                   "--clip-seconds", str(args.clip_seconds), "--skip-policy", args.skip_policy, "--reconnects", "0",
                   *weights]
            child = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)})
            rss, began = [], time.monotonic()
            process = psutil.Process(child.pid)
            while child.poll() is None:
                try:
                    memory = process.memory_info().rss
                except psutil.NoSuchProcess:
                    break
                if memory:  # 0: the child is exiting
                    rss.append((round(time.monotonic() - began, 1), round(memory / 2 ** 20, 1)))
                time.sleep(1.0)
        if child.returncode:
            raise SystemExit(f"grove live failed:\n{log.read_text()[-3000:]}")
        lines = [json.loads(line) for line in (out / "live" / "clips.jsonl").read_text().splitlines()]
        summary = json.loads((out / "live" / "live.json").read_text())
        (out / "rss.json").write_text(json.dumps(rss))
    latency = np.array([line["latency_s"] for line in lines])
    model = np.array([line["model_s"] for line in lines])
    print(f"{args.minutes:g} min stream at {args.speed:g}x, {args.clip_seconds:g}-s clips, {args.skip_policy}: "
          f"{len(lines)} clips predicted, {len(summary['dropped_clips'])} dropped, "
          f"{np.mean([len(line['phrases']) for line in lines]):.1f} phrases grounded per clip")
    print(f"latency s: p50 {np.percentile(latency, 50):.2f}, p95 {np.percentile(latency, 95):.2f}, "
          f"max {latency.max():.2f}; model s per clip: mean {model.mean():.2f}; "
          f"real-time factor {args.clip_seconds / model.mean():.2f}")
    print(rss_report(rss))


def rss_report(rss: list[tuple[float, float]]) -> str:
    """RSS at 20 s (the model loaded), at every 5 minutes and at the end; and the last 5-minute mark
    against the first (the end itself comes after the stream, while the timeline is written)."""
    if not rss:
        return "RSS: no samples"
    times = np.array([t for t, _ in rss])
    memory = np.array([m for _, m in rss])

    def at(t: float) -> tuple[float, float]:
        i = int(np.searchsorted(times, t).clip(max=len(times) - 1))
        return float(times[i]), float(memory[i])

    fives = list(np.arange(300.0, times[-1], 300.0))
    picks = dict(at(t) for t in [20.0, *fives, float(times[-1])])
    text = "RSS MiB over time: " + ", ".join(f"{t:.0f}s {m:.0f}" for t, m in picks.items())
    if len(fives) > 1:
        (first_t, first), (last_t, last) = at(fives[0]), at(fives[-1])
        text += f"; {last_t:.0f} s against {first_t:.0f} s: {last:.0f} / {first:.0f} MiB ({last / first - 1:+.1%})"
    return text


if __name__ == "__main__":
    main()
