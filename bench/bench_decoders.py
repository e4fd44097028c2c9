"""Video decoders side by side: PyAV (the project's reader), decord and torchcodec, on what training
and prediction ask of them: sparse 8-frame reads of 8-s clips, and one pass over a long video's
5-fps grid. Frames per CPU-second (per core), wall time, peak memory, and whether each decoder
gives PyAV's frames bit for bit (same indices, same pixels, same display rotation).

    PYTHONPATH=. python bench/bench_decoders.py [--clips 6] [--repeats 2] [--long-seconds 24]

Each measurement runs in a fresh process (its peak RSS above the RSS before decoding is the memory figure), one
decoder thread where the library lets it be set (per-core figures; CPU time counts every thread).
A decoder that cannot be imported or loaded is listed with its error. Videos are the panning
texture of bench/bench_decoding.py at HowTo100M's 455x256 and at 1280x720, 25 fps, 1-s keyframe
interval (``formats.video_writer.write_video``).
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from bench_decoding import FPS, NUM_FRAMES, panning_clip

from formats.frame_grids import annotation_grid
from formats.video_writer import VideoWriter, write_video

BACKENDS = ("pyav", "decord", "torchcodec")


def _status_mb(field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak since the last reset) of this process, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak() -> None:
    """Start the peak-RSS count afresh (Linux: writing 5 to clear_refs resets VmHWM)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _open(backend: str, path: Path):
    """A function ``read(indices) -> (N, H, W, 3) uint8`` over ``path`` for ``backend``."""
    if backend == "pyav":
        from formats.video_reader import PyAVVideoSource

        video = PyAVVideoSource(path)
        return video.read_frames, video.close
    if backend == "decord":
        import decord

        reader = decord.VideoReader(str(path), num_threads=1)
        return (lambda idx: reader.get_batch(list(idx)).asnumpy()), (lambda: None)
    if backend == "torchcodec":
        from torchcodec.decoders import VideoDecoder

        decoder = VideoDecoder(str(path), seek_mode="exact", num_ffmpeg_threads=1)
        return (lambda idx: decoder.get_frames_at(list(idx)).data.permute(0, 2, 3, 1).numpy()), (lambda: None)
    raise ValueError(backend)


def _stream(backend: str, path: Path, grid: np.ndarray):
    """Every frame of ``grid`` in one pass, yielded one at a time."""
    if backend == "pyav":
        from formats.video_reader import stream_frames

        for _, frame in stream_frames(path, grid):
            yield frame
        return
    read, close = _open(backend, path)
    for start in range(0, len(grid), 40):  # a clip's worth at a time, as a streaming reader holds
        yield from read(grid[start:start + 40])
    close()


def child(backend: str, mode: str, paths: list[str], indices: list[list[int]], repeats: int, keep: str) -> dict:
    """Time ``backend`` in this (fresh) process; the frames of the last repeat go to ``keep`` (.npy)."""
    try:
        _open(backend, Path(paths[0]))[1]()
    except Exception as err:  # noqa: BLE001 - a decoder that cannot load is a result, not a crash
        return {"error": f"{type(err).__name__}: {str(err).splitlines()[0][:150]}"}
    _reset_peak()
    base = _status_mb("VmRSS")
    frames = 0
    kept: list[np.ndarray] = []
    cpu, wall = time.process_time(), time.perf_counter()
    for r in range(repeats):
        kept = []
        for path, idx in zip(paths, indices):
            if mode == "sparse":  # a fresh reader per clip, as a data loader opens each sample's video
                read, close = _open(backend, Path(path))
                out = read(idx)
                close()
                kept.append(out)
                frames += len(out)
            else:
                checksum = []
                for frame in _stream(backend, Path(path), np.asarray(idx)):
                    checksum.append(frame[::16, ::16].copy())
                    frames += 1
                kept.append(np.stack(checksum))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    np.save(keep, np.concatenate([k.reshape(-1) for k in kept]))
    return {"frames": frames, "cpu": cpu, "wall": wall, "rss": _status_mb("VmHWM") - base}


def run(backend, mode, paths, indices, repeats, keep) -> dict:
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(child, backend, mode, [str(p) for p in paths], indices, repeats, keep).result()


def rotated_video(path: Path) -> Path:
    """A 128x96 video stored landscape with a 90-degree display rotation (a phone's portrait video)."""
    rng = np.random.default_rng(1)
    writer = VideoWriter(path, FPS, 128, 96, crf=23)
    writer.stream.set_display_rotation(90)  # side data of the stream, set before the first frame
    writer.write(rng.integers(0, 255, (10, 96, 128, 3), dtype=np.uint8))
    return writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clips", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--long-seconds", type=int, default=24)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    grid = annotation_grid(FPS, 0, NUM_FRAMES - 1)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; sparse: {args.clips} clips x "
          f"{args.repeats} repeats, 8 random grid frames of an 8-s clip (one per segment); stream: every grid "
          f"frame of a {args.long_seconds}-s video")
    print(f"{'size':>9} {'mode':>6} {'decoder':>10} {'frames/CPU-s':>12} {'vs PyAV':>8} {'frames/s':>9} "
          f"{'peak MB':>8} {'exact':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for width, height in ((455, 256), (1280, 720)):
            paths = [write_video(tmp / f"c{width}_{i}.mp4", panning_clip(rng, width, height), FPS, crf=23)
                     for i in range(args.clips)]
            segments = np.array_split(np.arange(len(grid)), 8)
            picks = [[int(grid[rng.choice(s)]) for s in segments] for _ in paths]
            writer = VideoWriter(tmp / f"long{width}.mp4", FPS, width, height, crf=23, gop=FPS)
            for _ in range(max(1, args.long_seconds * FPS // NUM_FRAMES)):
                writer.write(panning_clip(rng, width, height))
            long_path = writer.close()
            long_grid = annotation_grid(FPS, 0, writer.count - 1).tolist()
            for mode, mode_paths, mode_idx, repeats in (("sparse", paths, picks, args.repeats),
                                                        ("stream", [long_path], [long_grid], 1)):
                results = {}
                for backend in BACKENDS:
                    keep = str(tmp / f"{backend}_{mode}_{width}.npy")
                    results[backend] = run(backend, mode, mode_paths, mode_idx, repeats, keep)
                    res = results[backend]
                    if "error" in res:
                        print(f"{f'{width}x{height}':>9} {mode:>6} {backend:>10}  cannot load: {res['error']}")
                        continue
                    reference = np.load(str(tmp / f"pyav_{mode}_{width}.npy"))
                    mine = np.load(keep)
                    exact = mine.shape == reference.shape and np.array_equal(mine, reference)
                    rate = res["frames"] / res["cpu"]
                    ratio = rate / (results["pyav"]["frames"] / results["pyav"]["cpu"])
                    print(f"{f'{width}x{height}':>9} {mode:>6} {backend:>10} {rate:>12.1f} {ratio:>7.2f}x "
                          f"{res['frames'] / res['wall']:>9.1f} {res['rss']:>8.0f} {'yes' if exact else 'NO':>6}")
        rotated = rotated_video(tmp / "rotated.mp4")
        reference = None
        for backend in BACKENDS:
            try:
                read, close = _open(backend, rotated)
                frames = read([0, 5])
                close()
            except Exception as err:  # noqa: BLE001
                print(f"rotation (stored 128x96, shown 96x128): {backend}: cannot read ({type(err).__name__})")
                continue
            reference = frames if reference is None else reference
            same = frames.shape == reference.shape and np.array_equal(frames, reference)
            print(f"rotation (stored 128x96, shown 96x128): {backend} gives {frames.shape[2]}x{frames.shape[1]} "
                  f"({'upright' if frames.shape[1:3] == (128, 96) else 'NOT upright'}, "
                  f"{'the same pixels as PyAV' if same else 'pixels differ from PyAV'})")


if __name__ == "__main__":
    main()
