"""Cost of the HowToGround1M compact index: build time and resident memory for N synthetic
HowToGround-style records, and the per-sample record load time.

    PYTHONPATH=. python bench/bench_index.py [--records 100000] [--compare-records 10000] [--root DIR] [--keep]

Records are written as per-key pickles in the public layout (numpy boxes and labels; 40
annotated frames, 3 phrases, about 2 boxes a frame: about 80 boxes, like HowToGround1M's mean).
Each measurement runs in a fresh process so its peak resident memory is its own; the baseline is
a process that only imports the project. For comparison, on the first ``--compare-records``
records (their cost grows linearly): reading every record up front (what each DataLoader worker
would otherwise hold), and the single-pickle layout, which must be loaded whole once to be packed.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import pickle
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

FRAMES, PHRASES = 40, ("a person", "a knife", "a (red) bowl")


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def record_dict(i: int, rng: np.random.Generator) -> dict:
    present = rng.random((FRAMES, len(PHRASES))) < 0.7
    xy = rng.uniform(0, 1, (FRAMES, len(PHRASES), 2)) * [400, 180]
    boxes = np.concatenate([xy, xy + rng.uniform(20, 180, (FRAMES, len(PHRASES), 2))], -1).astype(np.float32)
    return {
        "video_fname": f"vid{i // 4:07d}.mp4", "video_id": f"vid{i // 4:07d}", "clip_id": str(i % 4),
        "fps": np.float64(25.0), "clip_start_frame": np.int64(0), "clip_end_frame": np.int64(5 * FRAMES - 1),
        "width": np.int64(640), "height": np.int64(360),
        "caption": "a person cuts a tomato with a knife over a (red) bowl",
        "tagged_caption": "<p>a person</p> cuts a tomato with <p>a knife</p> over <p>a (red) bowl</p>",
        "phrases": np.array(PHRASES),
        "bboxes": [boxes[f][present[f]] for f in range(FRAMES)],
        "labels": [np.array(PHRASES)[present[f]] for f in range(FRAMES)],
    }


def write_records(folder: Path, n: int) -> float:
    """Per-key pickles; a few distinct records re-keyed, so generation does not dominate."""
    rng = np.random.default_rng(0)
    templates = [record_dict(i, rng) for i in range(64)]
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for i in range(n):
        rec = dict(templates[i % 64], video_id=f"vid{i // 4:07d}", clip_id=str(i % 4),
                   video_fname=f"vid{i // 4:07d}.mp4")
        with open(folder / f"{rec['video_id']}_{rec['clip_id']}.pkl", "wb") as f:
            pickle.dump(rec, f, protocol=pickle.HIGHEST_PROTOCOL)
    return time.perf_counter() - start


def _in_child(fn, *args):
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(fn, args)


def child_baseline() -> dict:
    import core  # noqa: F401

    from datamodules.howtoground import LazyRecords  # noqa: F401

    return {"peak_mib": peak_rss_mib(), "rss_mib": current_rss_mib()}


def child_build(source: str, index_dir: str) -> dict:
    import core  # noqa: F401

    from datamodules.howtoground import build_index

    start = time.perf_counter()
    build_index(source, index_dir, rebuild=True)
    return {"seconds": time.perf_counter() - start, "peak_mib": peak_rss_mib()}


def child_open_and_load(index_dir: str, samples: int) -> dict:
    """What a DataLoader worker pays: open the index, touch every key, load random records."""
    import core  # noqa: F401

    from datamodules.howtoground import LazyRecords

    before = current_rss_mib()
    start = time.perf_counter()
    records = LazyRecords(index_dir)
    keys = records.keys()  # touches every page of the key array
    open_s = time.perf_counter() - start
    after_open = current_rss_mib()
    rng = np.random.default_rng(1)
    positions = rng.integers(0, len(records), samples)
    times = np.empty(samples)
    boxes = 0
    for j, p in enumerate(positions):
        t = time.perf_counter()
        rec = records[int(p)]
        times[j] = time.perf_counter() - t
        boxes += sum(len(b) for b in rec.bboxes)
    return {"open_s": open_s, "keys": len(keys), "rss_open_mib": after_open - before,
            "rss_after_loads_mib": current_rss_mib() - before, "load_ms": times * 1000,
            "boxes_per_record": boxes / samples}


def child_eager(source: str) -> dict:
    import core  # noqa: F401

    from formats.records import read_records

    before = current_rss_mib()
    start = time.perf_counter()
    records = read_records(source)
    return {"seconds": time.perf_counter() - start, "rss_mib": current_rss_mib() - before, "n": len(records)}


def dir_size_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file()) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=2000, help="random records loaded to time one load")
    parser.add_argument("--root", default=None, help="where to write the records (default: a temp folder)")
    parser.add_argument("--compare-records", type=int, default=10_000,
                        help="records for the eager-reading and single-pickle comparisons (0: skip)")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    root = Path(args.root or tempfile.mkdtemp(prefix="bench_index_"))
    folder = root / "per_key"
    print(f"{args.records} records, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, in {root}")
    try:
        gen = write_records(folder, args.records) if not folder.exists() else float("nan")
        print(f"wrote per-key pickles in {gen:.1f} s ({dir_size_mib(folder):.0f} MiB)")
        base = _in_child(child_baseline)
        build = _in_child(child_build, str(folder), str(root / "index_folder"))
        use = _in_child(child_open_and_load, str(root / "index_folder"), args.samples)
        ms = use["load_ms"]
        print(f"\nper-key folder layout ({use['boxes_per_record']:.0f} boxes per record on average)")
        print(f"  index build:            {build['seconds']:.2f} s, peak RSS {build['peak_mib']:.0f} MiB "
              f"(process baseline {base['peak_mib']:.0f} MiB)")
        print(f"  index on disk:          {dir_size_mib(root / 'index_folder'):.2f} MiB")
        print(f"  open + touch all keys:  {use['open_s'] * 1000:.0f} ms, +{use['rss_open_mib']:.1f} MiB RSS "
              f"(+{use['rss_after_loads_mib']:.1f} MiB after {args.samples} loads)")
        print(f"  record load:            median {np.median(ms):.2f} ms, mean {ms.mean():.2f} ms, "
              f"p95 {np.percentile(ms, 95):.2f} ms (warm page cache)")
        n = min(args.compare_records, args.records)
        if n:
            subset = root / "subset"
            subset.mkdir(exist_ok=True)
            files = sorted(folder.iterdir())[:n]
            for p in files:
                (subset / p.name).write_bytes(p.read_bytes())
            single = root / "all.pkl"
            with open(single, "wb") as f:
                pickle.dump({p.stem: pickle.loads(p.read_bytes()) for p in files}, f)
            build = _in_child(child_build, str(single), str(root / "index_packed"))
            use = _in_child(child_open_and_load, str(root / "index_packed"), args.samples)
            ms = use["load_ms"]
            print(f"\nsingle pickle of {n} records, packed once into one file")
            print(f"  index build (load + pack): {build['seconds']:.2f} s, peak RSS {build['peak_mib']:.0f} MiB "
                  f"(+{build['peak_mib'] - base['peak_mib']:.0f} MiB over the baseline)")
            print(f"  record load:            median {np.median(ms):.2f} ms, mean {ms.mean():.2f} ms, "
                  f"p95 {np.percentile(ms, 95):.2f} ms")
            eager = _in_child(child_eager, str(subset))
            scale = args.records / n
            print(f"\neager read_records of {n} per-key files: {eager['seconds']:.1f} s, "
                  f"+{eager['rss_mib']:.0f} MiB RSS "
                  f"per process (x{scale:.0f} for {args.records}: ~{eager['seconds'] * scale:.0f} s, "
                  f"~{eager['rss_mib'] * scale / 1024:.1f} GiB per DataLoader worker)")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
