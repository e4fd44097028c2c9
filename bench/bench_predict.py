"""``cli.py predict`` throughput on the demo model: clips per second by batch size and by how clips are
decoded (a video folder's clips read by seeking, or long-video mode's one streaming pass with the
decoding in a thread of the model's process or inline between batches).

    PYTHONPATH=. python bench/bench_predict.py [--seconds 64] [--batch-sizes 1 8] [--flops-only]

It first prints the released GROVE's forward FLOPs for the whole predict path of one 8-s clip
(sizing.flops.grove_clip_flops, counted analytically: the caption, then every window of the clip's
40 grid frames) and what one H100 needs per clip and per video-hour at 40 % MFU, for sizing a job.

configs/demo.yaml with randomly initialised weights (no checkpoint: the towers' and the model's
initial weights; the compute per clip is the trained model's), on one 455x256 25-fps video of
``--seconds`` seconds (8-s clips) next to one of 8 s, so that the start-up of the command cancels
out: clips/s = (clips - 1) / (time - time of the 1-clip run). Each run is a fresh process; CPU
seconds count the process and its children.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_decoding import FPS, NUM_FRAMES, panning_clip

from formats.video_writer import VideoWriter

ROOT = Path(__file__).resolve().parent.parent
MODES = {
    "folder": [],
    "long, thread": ["--config", "configs/long_video.yaml", "--data.init_args.decode_in=thread"],
    "long, inline": ["--config", "configs/long_video.yaml", "--data.init_args.decode_in=inline"],
}


def make_video(path: Path, seconds: int, rng: np.random.Generator) -> Path:
    content = panning_clip(rng, 455, 256)
    writer = VideoWriter(path, FPS, 455, 256, crf=23, gop=FPS)
    for k in range(max(1, seconds * FPS // NUM_FRAMES)):
        writer.write(content if k % 2 == 0 else content[::-1])
    return writer.close()


def predict(videos: Path, mode: str, batch_size: int, out: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one ``cli.py predict`` run."""
    cmd = [sys.executable, str(ROOT / "cli.py"), "predict", "--config", "configs/demo.yaml", *MODES[mode],
           f"--data.init_args.videos={videos}", f"--data.init_args.eval_batch_size={batch_size}",
           "--data.init_args.num_workers=0", "--model.init_args.global_encoder.checkpoint=null",
           "--model.init_args.grounding_encoder.checkpoint=null", f"--trainer.logger.init_args.save_dir={out}",
           "--trainer.enable_progress_bar=false"]
    before = os.times()
    wall = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    wall = time.perf_counter() - wall
    after = os.times()
    return wall, (after.children_user + after.children_system) - (before.children_user + before.children_system)


H100_BF16_PEAK = 989e12  # dense BF16 tensor-core FLOP/s of an H100 SXM
MFU = 0.4


def print_flops() -> None:
    """The released GROVE's forward FLOPs for one whole 8-s clip by step, and the H100 time at ``MFU``."""
    from sizing.flops import grove_clip_flops

    clip = grove_clip_flops()
    window = clip.per_window
    print(f"released GROVE, forward FLOPs of predict on one 8-s clip ({clip.grid_frames} grid frames at 5 fps, "
          f"{clip.num_windows} interleaved windows; configs/official/grove.yaml, 5 phrases):")
    parts = {"caption: CLIP tower on 8 frames, LLaMA-7B 686-token prompt + 64 new": clip.caption,
             f"{clip.num_windows - clip.reused_windows} x CLIP ViT-L/14-336 + adapters + VL (one window is the "
             f"caption's)" if clip.reused_windows else f"{clip.num_windows} x CLIP ViT-L/14-336 + adapters + VL":
                 (clip.num_windows - clip.reused_windows) * window.global_tower,
             f"{clip.num_windows} x SAM ViT-H at 512 + adapters": clip.num_windows * window.grounding_tower,
             f"{clip.num_windows} x LLaMA-7B pass, 750 positions": clip.num_windows * window.language_model,
             f"{clip.num_windows} x LQ + box decoder + heads": clip.num_windows * window.box_decoder}
    for name, value in parts.items():
        print(f"  {name:<66} {value / 1e12:7.2f} TFLOP")
    seconds = clip.seconds_per_clip(H100_BF16_PEAK, MFU)
    print(f"  {'total':<66} {clip.total / 1e12:7.2f} TFLOP; one H100 at {MFU:.0%} MFU: "
          f"{seconds * 1e3:.0f} ms per clip, {3600 / seconds:.0f} clips ({3600 / seconds * 8 / 3600:.1f} "
          f"video-hours) per GPU-hour, {450 * seconds / 3600:.3f} GPU-hours per video-hour")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=int, default=64)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--flops-only", action="store_true", help="print the FLOPs per clip and stop")
    args = parser.parse_args()
    print_flops()
    if args.flops_only:
        return
    rng = np.random.default_rng(0)
    clips = args.seconds // 8
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; demo model, random weights; "
          f"{clips} clips of 8 s (455x256, 25 fps) against a 1-clip run")
    print(f"{'decoding':>14} {'batch':>5} {'clips/s':>8} {'CPU-s/clip':>10} {'run s':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        long_video = make_video(tmp / "long" / "v.mp4", args.seconds, rng)
        short_video = make_video(tmp / "short" / "v.mp4", 8, rng)
        for mode in args.modes:
            base_wall, base_cpu = predict(short_video.parent, mode, 1, tmp / "runs")
            for batch in args.batch_sizes:
                wall, cpu = predict(long_video.parent, mode, batch, tmp / "runs")
                print(f"{mode:>14} {batch:>5} {(clips - 1) / max(wall - base_wall, 1e-9):>8.2f} "
                      f"{(cpu - base_cpu) / (clips - 1):>10.2f} {wall:>6.1f}")


if __name__ == "__main__":
    main()
