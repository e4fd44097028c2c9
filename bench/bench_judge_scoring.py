"""Pairs per second of the toy VC-Inspector judge scoring (video, caption) pairs on this machine.

``python bench/bench_judge_scoring.py [--pairs 48] [--batch-size 8] [--threads 1]``: the judge is
built exactly as configs/judge_demo.yaml builds it, with a trained checkpoint's weights when
``--ckpt-path`` is given (random weights answer in fewer tokens, so they score faster than a trained
judge that writes its whole explanation); the clips are synthetic (generated once into a temporary folder). Reports
the throughput of :func:`judge.application.scoring.score_pairs` (decoding, prompting, greedy
generation of up to the config's ``max_new_tokens``, parsing, writing), after one untimed batch.
"""
from __future__ import annotations

import core  # noqa: F401

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import torch

from datamodules.synthetic import generate_synthetic_dataset
from judge.application.loading import load_judge
from judge.application.scoring import score_pairs

ROOT = Path(__file__).resolve().parent.parent


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "judge_demo.yaml"))
    parser.add_argument("--pairs", type=int, default=48)
    parser.add_argument("--clips", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ckpt-path", default=None, help="a trained judge of the config (default: random weights)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    loaded = load_judge(args.config, ckpt_path=args.ckpt_path, overrides=["--model.init_args.vision_checkpoint=null"])
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "synthetic"
        generate_synthetic_dataset(root, num_train=1, num_val=1, num_test=args.clips, seed=0, workers=1)
        records = json.loads((root / "annotations" / "test.json").read_text())["records"]
        rows = [{"key": str(i), "video": records[i % len(records)]["video_fname"],
                 "caption": records[(i * 7) % len(records)]["caption"]} for i in range(args.pairs + args.batch_size)]
        settings = dict(video_root=str(root / "videos"), num_frames=loaded.num_frames, batch_size=args.batch_size,
                        max_new_tokens=loaded.max_new_tokens, progress=False)
        score_pairs(loaded.judge, rows[:args.batch_size], None, **settings)  # warm-up
        start = time.perf_counter()
        scored, summary = score_pairs(loaded.judge, rows[args.batch_size:], None, **settings)
        seconds = time.perf_counter() - start
    result = {"weights": args.ckpt_path or "random", "pairs": args.pairs, "seconds": round(seconds, 2),
              "pairs_per_second": round(args.pairs / seconds, 3),
              "batch_size": args.batch_size, "threads": args.threads, "num_frames": loaded.num_frames,
              "max_new_tokens": loaded.max_new_tokens,
              "parsed_share": round(summary["scored"] / len(scored), 3),
              "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
