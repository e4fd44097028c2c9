"""Seeded grounding cases whose figures were recorded from the grounding code before it was
vectorised further (``reference/grounding_reference.json``); regenerate the file only when the metric
definitions themselves change:

    PYTHONPATH=. python -m tests.metrics.grounding_reference_cases
"""
from __future__ import annotations

import json
import math
import zlib
from pathlib import Path

import numpy as np
import torch

REFERENCE = Path(__file__).parent / "reference" / "grounding_reference.json"
SEEDS = range(300, 360)
BENCH_SHAPE = (60, 12)  # clips x frames of the benchmark generator
THRESHOLDS = (0.3, 0.5, 0.8)


class WordVectorEncoder:
    """Deterministic phrase embeddings: the mean of fixed random word vectors (seeded by CRC-32 of
    the word), so similarities are graded in (-1, 1) and equal phrases agree exactly."""

    def encode(self, texts):
        out = []
        for text in texts:
            words = str(text).lower().split() or [""]
            vecs = [np.random.default_rng(zlib.crc32(w.encode())).normal(size=16) for w in words]
            out.append(np.mean(vecs, axis=0))
        return torch.tensor(np.asarray(out).reshape(-1, 16), dtype=torch.float32)


def cases():
    """``(name, gt, pred)``: the random cases of the metric tests and a small benchmark set."""
    from bench.bench_grounding_metrics import synthetic
    from tests.metrics.test_grounding_metrics import random_case

    for seed in SEEDS:
        gt, pred = random_case(seed)
        yield f"random{seed}", gt, pred
    gt, pred = synthetic(*BENCH_SHAPE, seed=7)
    yield "bench", gt, pred


def settings():
    """``(name, evaluate_grounding kwargs)`` for every case."""
    enc = WordVectorEncoder()
    for source in ("constant", "objectness"):
        yield f"{source}", dict(score_source=source, text_encoder=enc)
    for t in THRESHOLDS:
        yield f"text{t}", dict(metrics=("recall",), text_encoder=enc, text_threshold=t)
    yield "maxdets2", dict(metrics=("AP50",), score_source="objectness", max_dets=2)


def encode(value: float) -> str:
    return "nan" if math.isnan(value) else float(value).hex()


def record() -> dict:
    from metrics.functional.grounding import evaluate_grounding

    out = {}
    for case, gt, pred in cases():
        for name, kwargs in settings():
            out[f"{case}/{name}"] = {k: encode(v) for k, v in evaluate_grounding(gt, pred, **kwargs).items()}
    return out


if __name__ == "__main__":
    REFERENCE.write_text(json.dumps(record(), indent=0, sort_keys=True) + "\n")
    print(f"wrote {REFERENCE}")
