"""``cli.py predict`` on the demo model, per 8-s clip: the FLOPs for sizing a job, the start-up, CPU and
wall seconds part by part, the released inference's input procedure beside the project's, and
(``--whole``) the whole command's throughput.

    PYTHONPATH=.:bench python bench/bench_predict.py                      # all but --whole: 455x256 and
                                                                          # 1280x720, batch 1 and 8, 4 clips
    PYTHONPATH=.:bench python bench/bench_predict.py --clips 2 --sizes 455x256    # a short run
    PYTHONPATH=.:bench python bench/bench_predict.py --sections parts released --batch-sizes 1 --modes folder
    PYTHONPATH=.:bench python bench/bench_predict.py --flops-only          # the FLOPs per clip alone
    PYTHONPATH=.:bench python bench/bench_predict.py --sections whole --clips 8 --sizes 455x256   # throughput

Sections (``--sections``, in this order; ``--whole`` adds the last):

- ``flops``: the released GROVE's forward FLOPs for the whole predict path of one 8-s clip
  (sizing.flops.grove_clip_flops, counted analytically: the caption, then every window of the clip's
  40 grid frames) and what one H100 needs per clip and per video-hour at 40 % MFU.
- ``startup``: wall and CPU seconds of ``cli.py predict`` (a checkpoint of the demo model, one 8-s
  clip) from its process's start to Trainer.predict's setup and to the first ``predict_step``, and of
  the whole one-clip run, each against ``python -c "import torch"`` timed in the same run
  (bench/bench_startup.py's ``first_clip``, read by bench/first_clip_clock.py); the least of
  ``--repeats`` runs.
- ``parts``: every part of ``cli.py predict`` called in this process one after another
  (bench/bench_predict_parts.py): decode, preprocess, model forward, postprocess, prediction writer,
  MP4; CPU / wall seconds per clip, for each ``--sizes``, ``--modes`` (``folder``: a video folder's
  clips read by seeking; ``long``: long-video mode's one streaming pass) and ``--batch-sizes``.
  configs/demo.yaml with random weights (the compute per clip is the trained demo model's), torch on
  ``--threads`` threads.
- ``released``: the input of each clip as the official ``infer_iground.py`` builds it, one ffmpeg
  process per grid frame and every frame preprocessed at the released sizes (bench/released_inference.py
  says what it re-runs), beside the project's decode (VideoFolderDataset) and ``clip_sample`` at the
  same sizes (CLIP 336 px ``clip``, SAM 512 px ``sam``), with the ratio; on the first clip it asserts
  that both give the same pixels up to bf16 rounding. The model is the same for both, so the ratio
  compares what runs around it.
- ``whole``: the whole ``cli.py predict`` command, a fresh process per run, on a video of ``--clips``
  clips against one of 1 clip, so that the start-up cancels out: clips/s = (clips - 1) / (time - time
  of the 1-clip run); per ``--modes`` (``long`` runs the decoding in a thread and inline) and batch.

The videos are camera-like 25-fps content (a panning texture), ``--clips`` clips of 8 s each. CPU
seconds count this process and its finished children (ffmpeg), or a subprocess's whole tree.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from bench_predict_parts import PARTS, Timer, demo_module, make_video, run_folder, run_long

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("flops", "startup", "parts", "released", "whole")
WHOLE_MODES = {
    "folder": {"folder": []},
    "long": {"long, thread": ["--config", "configs/overlays/long_video.yaml", "--data.init_args.decode_in=thread"],
             "long, inline": ["--config", "configs/overlays/long_video.yaml", "--data.init_args.decode_in=inline"]},
}
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


def print_startup(tmp: Path, repeats: int) -> None:
    """Start of ``cli.py predict`` to its first ``predict_step``, against ``python -c "import torch"``."""
    from bench_startup import first_clip, run, write_checkpoint, write_video

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    ckpt = write_checkpoint(tmp / "demo.ckpt")
    videos = write_video(tmp / "startup" / "clip.mp4").parent
    best: dict[str, tuple[float, float]] = {}
    for _ in range(repeats):
        wall, cpu, _ = run([sys.executable, "-c", "import torch"], env)
        rows = {'python -c "import torch"': (wall, cpu), **first_clip(ckpt, videos, tmp, env)}
        for name, (wall, cpu) in rows.items():
            old = best.get(name, (float("inf"), float("inf")))
            best[name] = (min(old[0], wall), min(old[1], cpu))
    torch_wall, torch_cpu = best['python -c "import torch"']
    width = max(map(len, best))
    print(f"\nstart-up (one process; least of {repeats}), load average {os.getloadavg()[0]:.1f}:")
    print(f"  {'':<{width}}  {'wall s':>7} {'CPU s':>7} {'wall/torch':>10} {'CPU/torch':>9}")
    for name, (wall, cpu) in best.items():
        print(f"  {name:<{width}}  {wall:7.2f} {cpu:7.2f} {wall / torch_wall:10.2f} {cpu / torch_cpu:9.2f}")


def print_parts(module, hp, videos: dict[str, Path], modes: list[str], batch_sizes: list[int], tmp: Path) -> None:
    """CPU / wall seconds per clip of each part of predict, by size, mode and batch size."""
    print(f"\npredict part by part, seconds per 8-s clip, CPU / wall; load average {os.getloadavg()[0]:.1f}:")
    print(f"{'size':>9} {'mode':>6} {'batch':>5} " + " ".join(f"{p:>17}" for p in PARTS) + f" {'non-model CPU':>13}")
    for size, video in videos.items():
        for mode in modes:
            for batch_size in batch_sizes:
                timer = Timer()
                n = (run_folder if mode == "folder" else run_long)(module, hp, video, batch_size, tmp, timer)
                cells = " ".join(f"{timer.cpu[p] / n:>8.2f} /{timer.wall[p] / n:>7.2f}" for p in PARTS)
                non_model = sum(timer.cpu[p] for p in PARTS if p != "model") / n
                print(f"{size:>9} {mode:>6} {batch_size:>5} {cells} {non_model:>13.2f}", flush=True)


def print_released(videos: dict[str, Path]) -> None:
    """The released procedure's input of every clip beside the project's, per clip, with the ratio."""
    import imageio_ffmpeg
    from released_inference import compare

    ffmpeg = imageio_ffmpeg.get_ffmpeg_exe()
    print(f"\ninput of a clip at the released sizes (CLIP 336 px, SAM 512 px, all grid frames), seconds per 8-s "
          f"clip, CPU / wall; load average {os.getloadavg()[0]:.1f}:")
    print(f"{'size':>9} {'part':>10} {'released':>15} {'project':>15} {'released / project':>18}")
    for size, video in videos.items():
        timer = Timer()
        n, processes, note = compare(ffmpeg, video, timer)
        for part in ("decode", "preprocess", "total"):
            names = ("decode", "preprocess") if part == "total" else (part,)
            cells = []
            for side in ("released", "project"):
                cells.append((sum(timer.cpu[f"{side} {p}"] for p in names) / n,
                              sum(timer.wall[f"{side} {p}"] for p in names) / n))
            (rc, rw), (pc, pw) = cells
            print(f"{size:>9} {part:>10} {rc:>7.2f} /{rw:>6.2f} {pc:>7.2f} /{pw:>6.2f} "
                  f"{rc / pc:>8.1f}x /{rw / pw:>6.1f}x", flush=True)
        print(f"{size:>9} released decode: {processes / n:.0f} ffmpeg processes per clip; on the first clip: {note}")


def predict(videos: Path, mode_args: list[str], batch_size: int, out: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one ``cli.py predict`` run."""
    cmd = [sys.executable, str(ROOT / "cli.py"), "predict", "--config", "configs/demo.yaml", *mode_args,
           f"--data.init_args.videos={videos}", f"--data.init_args.eval_batch_size={batch_size}",
           "--data.init_args.num_workers=0", "--model.init_args.global_encoder.checkpoint=null",
           "--model.init_args.grounding_encoder.checkpoint=null", f"--trainer.logger.init_args.save_dir={out}",
           "--trainer.enable_progress_bar=false"]
    before = os.times()
    wall = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - wall
    if done.returncode != 0:
        raise SystemExit(f"cli.py predict failed ({done.returncode}):\n{done.stderr[-3000:]}")
    after = os.times()
    return wall, (after.children_user + after.children_system) - (before.children_user + before.children_system)


def print_whole(sizes: list[str], clips: int, modes: list[str], batch_sizes: list[int], tmp: Path) -> None:
    """The whole command's clips/s and CPU seconds per clip, its start-up cancelled by a 1-clip run."""
    if clips < 2:
        raise SystemExit("--sections whole needs --clips 2 or more (it subtracts a 1-clip run)")
    print(f"\nwhole cli.py predict, {clips} clips against a 1-clip run; load average {os.getloadavg()[0]:.1f}:")
    print(f"{'size':>9} {'decoding':>14} {'batch':>5} {'clips/s':>8} {'CPU-s/clip':>10} {'run s':>6}")
    for size in sizes:
        width, height = (int(v) for v in size.split("x"))
        long_video = make_video(tmp / "whole" / size / "long" / "v.mp4", clips * 8, np.random.default_rng(0),
                                width, height)
        short_video = make_video(tmp / "whole" / size / "short" / "v.mp4", 8, np.random.default_rng(0), width, height)
        for mode in modes:
            for name, mode_args in WHOLE_MODES[mode].items():
                base_wall, base_cpu = predict(short_video.parent, mode_args, 1, tmp / "runs")
                for batch in batch_sizes:
                    wall, cpu = predict(long_video.parent, mode_args, batch, tmp / "runs")
                    print(f"{size:>9} {name:>14} {batch:>5} {(clips - 1) / max(wall - base_wall, 1e-9):>8.2f} "
                          f"{(cpu - base_cpu) / (clips - 1):>10.2f} {wall:>6.1f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", nargs="+", default=[s for s in SECTIONS if s != "whole"], choices=SECTIONS,
                        help="what to run (default: all but whole)")
    parser.add_argument("--whole", action="store_true", help="also time the whole command (the whole section)")
    parser.add_argument("--flops-only", action="store_true", help="print the FLOPs per clip and stop")
    parser.add_argument("--clips", type=int, default=4, help="8-s clips per video")
    parser.add_argument("--sizes", nargs="+", default=["455x256", "1280x720"])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--modes", nargs="+", default=["folder", "long"], choices=["folder", "long"])
    parser.add_argument("--threads", type=int, default=1, help="torch's threads in this process (parts)")
    parser.add_argument("--repeats", type=int, default=1, help="start-up runs; the least is shown")
    args = parser.parse_args()
    sections = ["flops"] if args.flops_only else [s for s in SECTIONS if s in args.sections
                                                 or (s == "whole" and args.whole)]
    if "flops" in sections:
        print_flops()
    if sections == ["flops"]:
        return
    # the demo model is built from argument lists in this process, beside this command's own arguments
    warnings.filterwarnings("ignore", message="LightningCLI's args parameter is intended")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"\n{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; torch threads {args.threads}; demo model "
          f"(random weights); {args.clips} clips of 8 s per video, 25 fps")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if "startup" in sections:
            print_startup(tmp, args.repeats)
        videos = {}
        if "parts" in sections or "released" in sections:
            for size in args.sizes:
                width, height = (int(v) for v in size.split("x"))
                videos[size] = make_video(tmp / f"v{size}.mp4", args.clips * 8, np.random.default_rng(0), width,
                                          height)
        if "parts" in sections:
            module, datamodule = demo_module()
            print_parts(module, dict(datamodule.hparams), videos, args.modes, args.batch_sizes, tmp)
        if "released" in sections:
            print_released(videos)
        if "whole" in sections:
            print_whole(args.sizes, args.clips, args.modes, args.batch_sizes, tmp)


if __name__ == "__main__":
    main()
