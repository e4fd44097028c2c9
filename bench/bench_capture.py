"""Throughput of CAPTURE with the offline spaCy parser (parse caches cold, then warm) and of the
COCO METEOR + CIDEr evaluation, on synthetic multi-sentence captions.

    PYTHONPATH=. .venv/bin/python bench/bench_capture.py [--pairs 200] [--captions 1000]
"""
from __future__ import annotations

import argparse
import os
import random
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import core  # noqa: F401

SUBJECTS = ["man", "woman", "boy", "girl", "dog", "cat", "chef", "player", "child", "horse"]
OBJECTS = ["chair", "table", "ball", "bicycle", "sofa", "window", "car", "bench", "tree", "cup", "knife", "board"]
ADJECTIVES = ["red", "small", "wooden", "old", "young", "white", "black", "tall", "shiny", "blue"]
VERBS = ["sits on", "holds", "stands next to", "looks at", "walks toward", "leans against", "rides", "carries"]
PLACES = ["in a park", "in a kitchen", "on a street", "near the river", "in the background", "at night"]


def synthetic_caption(rng: random.Random, sentences: int) -> str:
    out = []
    for _ in range(sentences):
        s, o = rng.choice(SUBJECTS), rng.choice(OBJECTS)
        out.append(f"A {rng.choice(ADJECTIVES)} {s} {rng.choice(VERBS)} a {rng.choice(ADJECTIVES)} {o} "
                   f"{rng.choice(PLACES)}.")
    return " ".join(out)


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def bench_capture(pairs: int) -> None:
    from metrics.capture import CaptureScorer
    from metrics.text_encoder import default_text_encoder

    rng = random.Random(0)
    cands = [synthetic_caption(rng, rng.randint(2, 4)) for _ in range(pairs)]
    refs = [[synthetic_caption(rng, rng.randint(2, 4))] for _ in range(pairs)]
    # Loading spaCy (twice: parser and sentence splitter), WordNet and MiniLM happens once per process.
    _, load_s = timed(lambda: (CaptureScorer().score(["A dog."], [["A red cat."]]), default_text_encoder()))
    print(f"CAPTURE setup (spaCy pipelines, WordNet, MiniLM; once per process): {load_s:.2f} s")
    for soft in (True, False):
        scorer = CaptureScorer(soft_matching=soft)
        _, graphs_s = timed(lambda: scorer.scene_graphs(cands + [r for rs in refs for r in rs]))
        scorer.clear_cache()
        result, cold_s = timed(lambda: scorer.score(cands, refs))
        _, warm_s = timed(lambda: scorer.score(cands, refs))
        label = "with soft matching (MiniLM)" if soft else "exact + synonym only"
        print(f"CAPTURE {label}: {pairs} pairs, {2 * pairs} captions | extraction alone {graphs_s:.2f} s "
              f"({2 * pairs / graphs_s:.1f} captions/s) | cold {cold_s:.2f} s ({pairs / cold_s:.1f} pairs/s) "
              f"| warm {warm_s:.2f} s ({pairs / warm_s:.1f} pairs/s) | mean CAPTURE {result['CAPTURE']:.3f}")


def bench_coco(captions: int) -> None:
    from metrics.functional.captioning import evaluate_captions

    rng = random.Random(1)
    gts = {i: [synthetic_caption(rng, 1) for _ in range(3)] for i in range(captions)}
    res = {i: synthetic_caption(rng, 1) for i in range(captions)}
    for metrics in (("CIDEr",), ("METEOR", "CIDEr")):
        scores, seconds = timed(lambda: evaluate_captions(gts, res, metrics=metrics))
        shown = ", ".join(f"{k} {v:.3f}" for k, v in scores.items())
        print(f"COCO {'+'.join(metrics)} (PTB tokeniser included): {captions} captions x 3 references "
              f"in {seconds:.2f} s ({captions / seconds:.0f} captions/s) | {shown}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--captions", type=int, default=1000)
    args = parser.parse_args(argv)
    bench_capture(args.pairs)
    bench_coco(args.captions)


if __name__ == "__main__":
    main()
