"""Cost of reading the hub's HowToGround1M JSONL lazily: index build, cached start, memory.

    PYTHONPATH=. python bench/bench_jsonl_index.py [--rows 1000000] [--frames 40] [--compare-rows 50000]
        [--root DIR] [--keep]

Writes ``HowToGround1M_automatic_annotation_method.jsonl`` and its ``_keys.jsonl`` companion in
the hub layout (rows without ids; 40 annotated frames, 3 phrases, about 2 boxes a frame by
default, like HowToGround1M's mean), then, each in a fresh process so its peak resident memory is
its own:

* the index build (newline scan + the companion's keys) and what the index weighs;
* a cached start: opening the index again, what ``GroundedVideoDataModule`` does before training
  (length, 100 records spread over the file), and random record reads;
* on the first ``--compare-rows`` rows, their ids moved into the rows (the iGround layout): the
  build without a companion (every row parsed for its key), reading every row up front, and
  pyarrow's JSON reader (the Arrow conversion that ``datasets.load_dataset("json")`` runs before
  memory-mapping), scaled to ``--rows``.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

PHRASES = ("a person", "a knife", "a (red) bowl")
NAME = "HowToGround1M_automatic_annotation_method"


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mib(field: str = "VmRSS") -> float:
    """Resident memory; ``RssAnon``: the process's own (anonymous) pages, without mapped file pages,
    which are the page cache's and shared by every process mapping them."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def template_rows(frames: int, count: int = 64) -> list[str]:
    """``count`` distinct rows (JSON text without ids, ``%d`` for the video number)."""
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(count):
        present = rng.random((frames, len(PHRASES))) < 0.7
        xy = rng.uniform(0, 1, (frames, len(PHRASES), 2)) * [400, 180]
        boxes = np.concatenate([xy, xy + rng.uniform(20, 180, (frames, len(PHRASES), 2))], -1).round(2)
        row = {"video_fname": "VIDEO.mp4", "fps": 25.0, "clip_start_frame": 0, "clip_end_frame": 5 * frames - 1,
               "width": 640, "height": 360, "caption": "a person cuts a tomato with a knife over a (red) bowl",
               "tagged_caption": "<p>a person</p> cuts a tomato with <p>a knife</p> over <p>a (red) bowl</p>",
               "phrases": list(PHRASES), "bboxes": [boxes[f][present[f]].tolist() for f in range(frames)],
               "labels": [[p for p, k in zip(PHRASES, present[f]) if k] for f in range(frames)]}
        rows.append(json.dumps(row).replace("VIDEO", "vid%07d"))
    return rows


def write_hub_files(folder: Path, rows: int, frames: int) -> tuple[Path, float]:
    templates = template_rows(frames)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{NAME}.jsonl"
    start = time.perf_counter()
    with path.open("w") as data, (folder / f"{NAME}_keys.jsonl").open("w") as keys:
        for block in range(0, rows, 10_000):
            ids = range(block, min(rows, block + 10_000))
            data.write("".join(templates[i % 64] % (i // 4) + "\n" for i in ids))
            keys.write("".join(f'"vid{i // 4:07d}_{i % 4}"\n' for i in ids))
    return path, time.perf_counter() - start


def _in_child(fn, *args):
    with mp.get_context("spawn").Pool(1) as pool:
        return pool.apply(fn, args)


def child_baseline() -> dict:
    import core  # noqa: F401

    from formats.hub_jsonl import JsonlRecords  # noqa: F401

    return {"peak_mib": peak_rss_mib(), "rss_mib": current_rss_mib()}


def child_build(path: str, index_dir: str) -> dict:
    """Index a file (its ``_keys`` companion is used when one lies beside it)."""
    import core  # noqa: F401

    from formats.hub_jsonl import build_jsonl_index

    start = time.perf_counter()
    build_jsonl_index(path, index_dir, rebuild=True)
    return {"seconds": time.perf_counter() - start, "peak_mib": peak_rss_mib()}


def child_cached_start(path: str, index_dir: str, samples: int) -> dict:
    """A fresh process: open the (current) index as a DataModule does, then read random records."""
    import core  # noqa: F401

    from formats.hub_jsonl import open_jsonl_records

    before, before_anon = current_rss_mib(), current_rss_mib("RssAnon")
    start = time.perf_counter()
    records = open_jsonl_records(path, index_dir)
    n = len(records)
    spread = np.unique(np.linspace(0, n - 1, num=min(n, 100)).round().astype(int))
    for p in spread:  # what GroundedVideoDataModule checks before training (videos of 100 clips)
        records[int(p)].video_fname
    start_s = time.perf_counter() - start
    rss_start = current_rss_mib() - before
    anon_start = current_rss_mib("RssAnon") - before_anon
    index_bytes = sum(a.nbytes for a in records.arrays().values())
    positions = np.random.default_rng(1).integers(0, n, samples)
    times = np.empty(samples)
    for j, p in enumerate(positions):
        t = time.perf_counter()
        records[int(p)]
        times[j] = time.perf_counter() - t
    return {"start_s": start_s, "rss_start_mib": rss_start, "anon_start_mib": anon_start,
            "anon_after_mib": current_rss_mib("RssAnon") - before_anon, "rss_after_mib": current_rss_mib() - before,
            "peak_mib": peak_rss_mib(), "index_mib": index_bytes / 2**20, "load_ms": times * 1000, "n": n}


def child_eager(path: str) -> dict:
    import core  # noqa: F401

    from formats.hub_jsonl import read_jsonl_records

    before = current_rss_mib()
    start = time.perf_counter()
    records = read_jsonl_records(path)
    return {"seconds": time.perf_counter() - start, "rss_mib": current_rss_mib() - before, "n": len(records)}


def child_arrow(path: str) -> dict:
    import pyarrow.json as pj

    before = current_rss_mib()
    start = time.perf_counter()
    table = pj.read_json(path)
    return {"seconds": time.perf_counter() - start, "table_mib": table.nbytes / 2**20,
            "rss_mib": current_rss_mib() - before, "peak_mib": peak_rss_mib()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--frames", type=int, default=40, help="annotated frames per clip")
    parser.add_argument("--samples", type=int, default=2000, help="random records read to time one read")
    parser.add_argument("--compare-rows", type=int, default=50_000,
                        help="rows for the no-companion, eager and Arrow comparisons (0: skip)")
    parser.add_argument("--root", default=None, help="where to write the files (default: a temp folder)")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    root = Path(args.root or tempfile.mkdtemp(prefix="bench_jsonl_"))
    print(f"{args.rows} rows of {args.frames} annotated frames, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}, in {root}")
    try:
        path = root / "hub" / f"{NAME}.jsonl"
        if not path.exists():
            path, wrote = write_hub_files(path.parent, args.rows, args.frames)
            print(f"wrote the JSONL and its keys companion in {wrote:.1f} s")
        size_mib = path.stat().st_size / 2**20
        print(f"JSONL: {size_mib:.0f} MiB ({size_mib * 2**20 / args.rows:.0f} bytes a row)")
        base = _in_child(child_baseline)
        index = root / "index"
        build = _in_child(child_build, str(path), str(index))
        use = _in_child(child_cached_start, str(path), str(index), args.samples)
        disk = sum(p.stat().st_size for p in index.iterdir()) / 2**20
        ms = use["load_ms"]
        print("\nwith the _keys companion (the hub's HowToGround1M layout)")
        print(f"  index build:          {build['seconds']:.1f} s, peak RSS {build['peak_mib']:.0f} MiB "
              f"(a process that only imports the reader: {base['peak_mib']:.0f} MiB)")
        print(f"  index:                {use['index_mib']:.1f} MiB memory-mapped ({disk:.1f} MiB on disk)")
        print(f"  cached start:         {use['start_s'] * 1000:.0f} ms (open the index, length, 100 records "
              f"spread over the file), +{use['rss_start_mib']:.1f} MiB RSS, of which "
              f"+{use['anon_start_mib']:.1f} MiB the process's own (the rest: mapped index pages)")
        print(f"  record read:          median {np.median(ms):.2f} ms, p95 {np.percentile(ms, 95):.2f} ms; "
              f"+{use['rss_after_mib']:.1f} MiB RSS (+{use['anon_after_mib']:.1f} MiB own) after {args.samples} "
              f"reads, peak {use['peak_mib']:.0f} MiB")
        n = min(args.compare_rows, args.rows)
        if n:
            scale = args.rows / n
            subset = root / "subset" / f"{NAME}.jsonl"
            subset.parent.mkdir(parents=True, exist_ok=True)
            keys = path.with_name(f"{NAME}_keys.jsonl")
            with path.open() as src, keys.open() as src_keys, subset.open("w") as dst:
                for _, line, key in zip(range(n), src, src_keys):  # the ids moved into the rows
                    video_id, _, clip_id = json.loads(key).rpartition("_")
                    dst.write(f'{{"video_id": "{video_id}", "clip_id": "{clip_id}", ' + line[1:])
            print(f"\non the first {n} rows (x{scale:.0f} for {args.rows})")
            own = _in_child(child_build, str(subset), str(root / "index_own"))  # no companion beside it
            print(f"  index build, keys parsed from the rows (no companion): {own['seconds']:.1f} s "
                  f"(~{own['seconds'] * scale:.0f} s for {args.rows}), peak RSS {own['peak_mib']:.0f} MiB")
            eager = _in_child(child_eager, str(subset))
            print(f"  every row read up front: {eager['seconds']:.1f} s, +{eager['rss_mib']:.0f} MiB RSS "
                  f"(~{eager['seconds'] * scale:.0f} s and ~{eager['rss_mib'] * scale / 1024:.1f} GiB per process "
                  f"for {args.rows})")
            try:
                arrow = _in_child(child_arrow, str(subset))
            except ImportError:
                print("  pyarrow is not installed: Arrow comparison skipped")
            else:
                print(f"  pyarrow JSON -> Arrow table: {arrow['seconds']:.1f} s, table {arrow['table_mib']:.0f} MiB, "
                      f"+{arrow['rss_mib']:.0f} MiB RSS (~{arrow['seconds'] * scale:.0f} s and a "
                      f"~{arrow['table_mib'] * scale / 1024:.1f} GiB Arrow file to write and map for {args.rows})")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
