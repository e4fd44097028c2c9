"""Long-video mode's time and memory against the video's length: streaming decode, and the tiny model.

    PYTHONPATH=. python bench/bench_long_video.py --minutes 1 10 60 --model-minutes 1 10 60 \\
        --eval-batch-sizes 8 2 --ckpt runs/demo/version_0/checkpoints/last.ckpt [--out data/bench_long]

A one-minute long synthetic video (640x360 at 30 fps by default, ``longvideo.synthetic_long``) is
made once; the longer ones play it ``minutes`` times in a row (remuxed, no re-encoding: rendering an
hour of synthetic frames would take longer than the measurements). For each length, each in a fresh
process:

- ``decode``: the one-pass decode alone (every grid frame to RGB): CPU seconds, frames per CPU second,
  peak RSS;
- ``stream``: the long-video predict loader alone (``longvideo.datamodule.LongVideoClips``: one
  decoding pass, 8-s clips planned and preprocessed for the model): wall time, source frames
  decoded per second, peak RSS;
- ``seek``: the official inference package's way, one seek per wanted frame (seek to the keyframe
  before it, decode up to it), on the first ``--seek-frames`` grid frames: seconds per grid frame,
  and the time that gives for the whole video;
- ``model`` (lengths in ``--model-minutes``, clips per batch in ``--eval-batch-sizes``): ``cli.py
  predict`` with ``configs/overlays/long_video.yaml`` on the tiny model: wall time and the kernel's peak RSS
  (high-water mark) of the process (clips are decoded in a thread of it), and the process tree's
  sampled PSS (with ``--predict-args='--data.init_args.decode_in=worker'``: a forked worker's pages
  count once, not twice).

Peak memory is the process tree's summed PSS (proportional set size: a page shared by the main process
and its forked DataLoader worker counts once; plain RSS would count it in both), sampled with psutil
every 0.2 s; CPU seconds (user + system,
from ``getrusage``) are given next to wall times, which a busy machine stretches.
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def peak_rss(cmd: list[str], cwd: Path = ROOT) -> tuple[float, float, int, str, int]:
    """``(wall s, CPU s, peak PSS bytes of the process tree (sampled), stdout, peak RSS bytes)`` of a command.

    The peak RSS is the kernel's high-water mark of the command's process (``wait4``'s ``ru_maxrss``,
    the largest of it and its children): exact, where sampling can miss a short peak.
    """
    import os

    import psutil

    start = time.perf_counter()
    out = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    parent = psutil.Process(proc.pid)
    peak = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        try:
            # proportional set size: pages a forked DataLoader worker shares with its parent count once
            rss = sum(p.memory_full_info().pss for p in [parent, *parent.children(recursive=True)])
            peak = max(peak, rss)
        except psutil.Error:
            pass
        time.sleep(0.2)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    cpu = usage.ru_utime + usage.ru_stime
    out.seek(0)
    text = out.read().decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{text[-3000:]}")
    return wall, cpu, peak, text, usage.ru_maxrss * 1024


def repeat_video(source: Path, out: Path, times: int) -> Path:
    """``source`` played ``times`` times in a row, remuxed (packets copied, timestamps shifted; no re-encoding)."""
    import av

    tmp = out.with_name(f".{out.name}.partial")
    with av.open(str(source)) as src, av.open(str(tmp), "w", format="mp4") as dst:
        stream = src.streams.video[0]
        copy = dst.add_stream_from_template(stream)
        span = None
        for k in range(times):
            src.seek(0)
            last = 0
            for packet in src.demux(stream):
                if packet.dts is None:
                    continue
                if span is None or k == 0:
                    last = max(last, packet.pts + packet.duration)
                else:
                    packet.pts += k * span
                    packet.dts += k * span
                packet.stream = copy
                dst.mux(packet)
            span = span or last
    tmp.replace(out)
    return out


def child_stream(path: str) -> None:
    """Child: run the long-video loader over the video; print frames and clips."""
    import core  # noqa: F401

    from longvideo.datamodule import LongVideoClips

    data = LongVideoClips(path, clip_seconds=8.0, num_frames=8, global_image_size=64, grounding_image_size=128)
    clips = sum(1 for s in data if "key" in s)
    print(json.dumps({"clips": clips, "frames": data.videos[0].num_frames}))


def child_decode(path: str) -> None:
    """Child: the one-pass decode alone (every grid frame to RGB): CPU and wall seconds."""
    import numpy as np

    from datamodules.video_folder import probe_videos
    from formats.frame_grids import annotation_grid
    from formats.video_reader import stream_frames

    (info,), _ = probe_videos(path, "raise")
    grid = annotation_grid(info.fps, 0, info.num_frames - 1)
    cpu, wall = time.process_time(), time.perf_counter()
    count = sum(1 for _ in stream_frames(path, grid))
    print(json.dumps({"grid": count, "cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall,
                      "frames": info.num_frames, "check": int(np.sum(grid[:3]))}))


def child_seek(path: str, count: int) -> None:
    """Child: one seek per grid frame (keyframe before it, then decode up to it), the first ``count`` of them."""
    from fractions import Fraction

    import av
    import numpy as np

    from formats.frame_grids import annotation_grid

    container = av.open(path)
    stream = container.streams.video[0]
    rate = Fraction(stream.average_rate)
    base = Fraction(stream.time_base)
    n = stream.frames
    grid = annotation_grid(float(rate), 0, n - 1)[:count]
    start, cpu = time.perf_counter(), time.process_time()
    for target in grid:
        container.seek(int(Fraction(int(target)) / rate / base), stream=stream, backward=True)
        for frame in container.decode(stream):
            if int(round(frame.pts * base * rate)) >= target:
                np.asarray(frame.to_ndarray(format="rgb24"))
                break
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    total = len(annotation_grid(float(rate), 0, n - 1))
    print(json.dumps({"frames": len(grid), "seconds": seconds, "cpu": cpu, "grid_total": total}))


def last_json(text: str) -> dict:
    return json.loads([line for line in text.splitlines() if line.startswith("{")][-1])


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=int, nargs="+", default=[1, 10, 60])
    parser.add_argument("--model-minutes", type=int, nargs="*", default=[1])
    parser.add_argument("--ckpt", help="tiny model checkpoint for the model rows (configs/demo.yaml)")
    parser.add_argument("--predict-args", default="",
                        help="more cli.py predict arguments for the model rows, in one string, e.g. "
                             "--predict-args='--data.init_args.decode_in=worker'")
    parser.add_argument("--eval-batch-sizes", type=int, nargs="+", default=[8],
                        help="clips per model call for the model rows (configs/demo.yaml: 8)")
    parser.add_argument("--out", default=str(ROOT / "data" / "bench_long"))
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=360)
    parser.add_argument("--fps", type=float, default=30.0)
    parser.add_argument("--seek-frames", type=int, default=100)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, path, *rest = args.child
        {"stream": child_stream, "decode": child_decode}.get(kind, lambda p: child_seek(p, int(rest[0])))(path)
        return []
    from longvideo.synthetic_long import LongVideoConfig, generate_long_video

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    unit = out / f"long_1min_{args.width}x{args.height}_{args.fps:g}fps.mp4"
    if not unit.exists() or not unit.with_suffix(".json").exists():
        t = time.perf_counter()
        generate_long_video(unit, LongVideoConfig(duration_s=60, fps=args.fps, width=args.width, height=args.height))
        print(f"made {unit} in {time.perf_counter() - t:.0f} s", flush=True)
    for minutes in args.minutes:
        video = unit if minutes == 1 else out / f"repeat_{minutes:g}min_{args.width}x{args.height}_{args.fps:g}fps.mp4"
        if not video.exists():
            repeat_video(unit, video, int(minutes))
        me = [sys.executable, str(Path(__file__).resolve())]
        wall, cpu, peak, text, _ = peak_rss([*me, "--child", "stream", str(video)])
        info = last_json(text)
        row = {"minutes": minutes, "frames": info["frames"], "clips": info["clips"], "stream_s": wall,
               "stream_cpu_s": cpu, "stream_fps": info["frames"] / wall, "stream_peak_mib": peak / 2**20}
        _, _, decode_peak, text, _ = peak_rss([*me, "--child", "decode", str(video)])
        decode = last_json(text)
        row.update(decode_cpu_s=decode["cpu"], decode_wall_s=decode["wall"], decode_peak_mib=decode_peak / 2**20,
                   decode_fps_cpu=decode["frames"] / max(decode["cpu"], 1e-9))
        _, _, _, text, _ = peak_rss([*me, "--child", "seek", str(video), str(args.seek_frames)])
        seek = last_json(text)
        row["seek_cpu_s_per_grid_frame"] = seek["cpu"] / seek["frames"]
        row["seek_cpu_total_s"] = row["seek_cpu_s_per_grid_frame"] * seek["grid_total"]
        if minutes in args.model_minutes and args.ckpt:
            for batch in args.eval_batch_sizes:
                run_dir = out / f"predict_{minutes:g}min_b{batch}"
                cmd = [sys.executable, "cli.py", "predict", "--config", "configs/demo.yaml", "--config",
                       "configs/overlays/long_video.yaml", f"--ckpt_path={args.ckpt}", f"--data.videos={video}",
                       "--model.init_args.global_encoder.checkpoint=null",
                       "--model.init_args.grounding_encoder.checkpoint=null",
                       f"--data.init_args.eval_batch_size={batch}",
                       f"--trainer.logger.init_args.save_dir={run_dir}", "--trainer.enable_progress_bar=false",
                       "--trainer.callbacks.render=false", *shlex.split(args.predict_args)]
                wall, cpu, peak, _, hwm = peak_rss(cmd)
                row[f"model_b{batch}"] = dict(s=wall, cpu_s=cpu, fps=info["frames"] / wall, peak_pss_mib=peak / 2**20,
                                              peak_rss_mib=hwm / 2**20)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\n| minutes | frames | one-pass decode: CPU s (frames/CPU s) | peak PSS MiB | seek per grid frame: "
          "CPU s (whole video) | loader (decode + clips): wall s (CPU s) | peak PSS MiB |")
    print("|---" * 7 + "|")
    for r in rows:
        print(f"| {r['minutes']:g} | {r['frames']} | {r['decode_cpu_s']:.1f} ({r['decode_fps_cpu']:.0f}) "
              f"| {r['decode_peak_mib']:.0f} | {r['seek_cpu_total_s']:.0f} "
              f"| {r['stream_s']:.0f} ({r['stream_cpu_s']:.0f}) | {r['stream_peak_mib']:.0f} |")
    if any(k.startswith("model_b") for r in rows for k in r):
        print("\n| minutes | clips per batch | tiny model predict: wall s (CPU s) | frames/s (wall) "
              "| peak RSS MiB (high-water mark) | x the 1-minute run | process tree peak PSS MiB (sampled) |")
        print("|---" * 7 + "|")
        for batch in args.eval_batch_sizes:
            base = next((r[f"model_b{batch}"]["peak_rss_mib"] for r in rows if f"model_b{batch}" in r), None)
            for r in rows:
                m = r.get(f"model_b{batch}")
                if m:
                    print(f"| {r['minutes']:g} | {batch} | {m['s']:.0f} ({m['cpu_s']:.0f}) | {m['fps']:.0f} "
                          f"| {m['peak_rss_mib']:.0f} | {m['peak_rss_mib'] / base:.2f} | {m['peak_pss_mib']:.0f} |")
    return rows


if __name__ == "__main__":
    main()
