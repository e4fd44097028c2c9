"""Speed of the grounding metrics (AP50 + mIoU + recall, video and frame level) on an iGround-sized
synthetic test set, against the public evaluator's approach (one pycocotools COCOeval per video).

    PYTHONPATH=. python bench/bench_grounding_metrics.py [--clips 1000] [--frames 40] [--coco-clips N]

The MiniLM load is timed separately and excluded. Embedding the phrases is included in the "cold"
rows (a fresh phrase vocabulary: every distinct phrase encoded once); the "warm" rows look them up
in the run's vocabulary, as every evaluation after the first does (each validation epoch, each
threshold of a sweep). Wall and CPU time are printed; every row is the best of ``--repeats`` runs.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import math
import time

import numpy as np
import torch

from metrics.functional.frame_boxes import FrameBoxes
from metrics.functional.grounding import evaluate_grounding
from metrics.text_encoder import ExactMatchEncoder, PhraseVocabulary, default_text_encoder

ADJECTIVES = ["red", "small", "wooden", "metal", "white", "black", "large", "green", "plastic", "sharp",
              "blue", "round", "old", "clean", "glass", "hot", "yellow", "empty", "full", "silver"]
NOUNS = ["man", "woman", "knife", "bowl", "cup", "pan", "spoon", "board", "hand", "bottle", "plate", "table",
         "onion", "tomato", "phone", "box", "brush", "car", "tool", "paper", "towel", "pot", "lid", "jar",
         "glove", "hammer", "drill", "screw", "bag", "shirt"]


def synthetic(clips: int, frames: int, seed: int = 0):
    """GT with ~3 boxes per frame (3 phrases per clip, each present 90 % of frames) and predictions
    that jitter them, sometimes rename them, miss some and add false positives."""
    rng = np.random.default_rng(seed)
    phrase = lambda: f"{rng.choice(['a', 'the'])} {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}"  # noqa: E731
    gt, pred = {}, {}
    for c in range(clips):
        key, start = f"video{c:05d}_{c % 7}", int(rng.integers(0, 5000))
        phrases = [phrase() for _ in range(3)]
        renamed = [p if rng.random() < 0.6 else phrase() for p in phrases]
        centre = rng.uniform(100, 500, size=(3, 2))
        size = rng.uniform(40, 200, size=(3, 2))
        g_frames, p_frames = [], []
        for f in range(frames):
            centre += rng.normal(0, 3, size=centre.shape)
            present = rng.random(3) < 0.9
            boxes = np.concatenate([centre - size / 2, centre + size / 2], axis=1)[present]
            labels = [p for p, k in zip(phrases, present) if k]
            g_frames.append(FrameBoxes(start + 6 * f, boxes, labels))
            hit = present & (rng.random(3) < 0.85)
            pb = (np.concatenate([centre - size / 2, centre + size / 2], axis=1)[hit]
                  + rng.normal(0, 12, size=(hit.sum(), 4)))
            pb[:, 2:] = np.maximum(pb[:, 2:], pb[:, :2] + 1)
            pl = [p for p, k in zip(renamed, hit) if k]
            n_fp = int(rng.random() < 0.3)
            fp = rng.uniform(0, 400, size=(n_fp, 2))
            pb = np.concatenate([pb, np.concatenate([fp, fp + rng.uniform(20, 150, size=(n_fp, 2))], axis=1)])
            pl = pl + [phrase() for _ in range(n_fp)]
            if len(pl):
                p_frames.append(FrameBoxes(start + 6 * f, pb, pl, rng.random(len(pl))))
        gt[key], pred[key] = g_frames, p_frames
    return gt, pred


def pycocotools_per_video(gt, pred) -> tuple[float, float]:
    """The public evaluator's loop: one COCOeval per video (default params), AP50 = stats[1]."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    aps, start = [], time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        for key, frames in gt.items():
            images, anns = [{"id": i + 1} for i in range(len(frames))], []
            for i, f in enumerate(frames):
                for b in f.boxes:
                    anns.append({"id": len(anns) + 1, "image_id": i + 1, "category_id": 1, "iscrowd": 0,
                                 "bbox": [b[0], b[1], b[2] - b[0], b[3] - b[1]], "area": (b[2] - b[0]) * (b[3] - b[1])})
            index = {f.frame: i + 1 for i, f in enumerate(frames)}
            dets = [{"image_id": index[f.frame], "category_id": 1, "score": 1.0,
                     "bbox": [b[0], b[1], b[2] - b[0], b[3] - b[1]]} for f in pred.get(key, []) for b in f.boxes]
            if not anns:
                continue
            if not dets:
                aps.append(0.0)
                continue
            coco = COCO()
            coco.dataset = {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "object"}]}
            coco.createIndex()
            ev = COCOeval(coco, coco.loadRes(dets), "bbox")
            ev.evaluate()
            ev.accumulate()
            ev.summarize()
            aps.append(ev.stats[1])
    return float(np.mean(aps)), time.perf_counter() - start


def _timed(fn, repeats: int) -> tuple[float, float, dict]:
    """Best (wall, CPU) seconds of ``repeats`` calls, and the last result."""
    best = (math.inf, math.inf)
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        result = fn()
        best = min(best, (time.perf_counter() - wall, time.process_time() - cpu))
    return best[0], best[1], result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=1000)
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--coco-clips", type=int, default=None, help="clips for the pycocotools loop (default: all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    t = time.perf_counter()
    gt, pred = synthetic(args.clips, args.frames)
    n_gt = sum(len(f.labels) for v in gt.values() for f in v)
    n_pred = sum(len(f.labels) for v in pred.values() for f in v)
    phrases = {label for side in (gt, pred) for v in side.values() for f in v for label in f.labels}
    print(f"data: {args.clips} clips x {args.frames} frames, {n_gt} GT boxes, {n_pred} predicted boxes, "
          f"{len(phrases)} distinct phrases (built in {time.perf_counter() - t:.1f} s); torch threads {args.threads}")

    t = time.perf_counter()
    encoder = default_text_encoder()
    encoder.encode(["warm up"])
    print(f"MiniLM load (excluded): {time.perf_counter() - t:.2f} s")

    warm = PhraseVocabulary()
    rows = [("AP50 only", dict(metrics=("AP50",))),
            ("mIoU only", dict(metrics=("mIoU",))),
            ("recall only, exact-match encoder", dict(metrics=("recall",), text_encoder=ExactMatchEncoder())),
            ("recall only, MiniLM, cold vocabulary", dict(metrics=("recall",), text_encoder=encoder, fresh=True)),
            ("recall only, MiniLM, warm vocabulary", dict(metrics=("recall",), text_encoder=encoder, vocabulary=warm)),
            ("ALL, MiniLM, cold vocabulary", dict(text_encoder=encoder, fresh=True)),
            ("ALL, MiniLM, warm vocabulary", dict(text_encoder=encoder, vocabulary=warm))]
    evaluate_grounding(gt, pred, text_encoder=encoder, vocabulary=warm)  # fills the warm vocabulary
    timings = {}
    for name, kwargs in rows:
        fresh = kwargs.pop("fresh", False)
        call = (lambda kw=kwargs: evaluate_grounding(gt, pred, vocabulary=PhraseVocabulary(), **kw)) if fresh \
            else (lambda kw=kwargs: evaluate_grounding(gt, pred, **kw))
        wall, cpu, result = _timed(call, args.repeats)
        timings[name] = wall, cpu
        print(f"  {name:40s} wall {wall:6.3f} s   CPU {cpu:6.3f} s")
    print("  results: " + ", ".join(f"{k}={v:.4f}" for k, v in result.items() if not k.startswith("num_")))

    coco_gt = dict(list(gt.items())[: args.coco_clips or len(gt)])
    ours = evaluate_grounding(coco_gt, pred, metrics=("AP50",), levels=("video",))["AP50"]
    wall = time.perf_counter()
    cpu = time.process_time()
    coco_ap, _ = pycocotools_per_video(coco_gt, pred)
    coco_wall, coco_cpu = time.perf_counter() - wall, time.process_time() - cpu
    scale = len(gt) / len(coco_gt)
    coco_wall, coco_cpu = coco_wall * scale, coco_cpu * scale
    print(f"pycocotools, one COCOeval per video ({len(coco_gt)} clips"
          + (f", x{scale:.1f} for all" if scale > 1 else "") + f"): wall {coco_wall:.2f} s, CPU {coco_cpu:.2f} s; "
          f"AP50 {coco_ap:.6f} vs ours {ours:.6f}")
    for name in ("AP50 only", "ALL, MiniLM, warm vocabulary", "ALL, MiniLM, cold vocabulary"):
        wall, cpu = timings[name]
        print(f"speed-up of {name} over the pycocotools AP50 loop: wall {coco_wall / wall:.1f}x, "
              f"CPU {coco_cpu / cpu:.1f}x")


if __name__ == "__main__":
    main()
