"""Speed of the mask metrics: mask AP50 + mIoU + recall (against the same metrics on boxes), GLaMM's GCG
mask mIoU and recall, and J&F, on synthetic clips whose masks are the ellipses inscribed in the
boxes of bench/bench_grounding_metrics.py's set (frame size as given).

    PYTHONPATH=. python bench/bench_mask_metrics.py [--clips 100] [--frames 40] [--height 360 --width 640]

Encoding the masks is not timed. Phrases are compared exactly (no text model). Every row is the
best of ``--repeats`` runs; the J&F row times one clip of ``--frames`` full-size frames.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from bench.bench_grounding_metrics import synthetic
from formats.mask_rle import decode_masks, encode_masks
from metrics.functional.frame_boxes import FrameBoxes
from metrics.functional.gcg_masks import GCGImage, gcg_mask_sums
from metrics.functional.grounding import evaluate_grounding
from metrics.functional.region_contour import j_and_f
from metrics.text_encoder import ExactMatchEncoder


def with_masks(clips: dict, height: int, width: int) -> dict:
    yy, xx = np.mgrid[:height, :width] + 0.5
    out = {}
    for key, frames in clips.items():
        masked = []
        for f in frames:
            boxes = np.clip(f.boxes, 0, [width, height, width, height])
            cx, cy = (boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2
            rx = np.maximum((boxes[:, 2] - boxes[:, 0]) / 2, 0.5)
            ry = np.maximum((boxes[:, 3] - boxes[:, 1]) / 2, 0.5)
            m = ((xx[None] - cx[:, None, None]) / rx[:, None, None]) ** 2 + \
                ((yy[None] - cy[:, None, None]) / ry[:, None, None]) ** 2 <= 1
            masked.append(FrameBoxes(f.frame, f.boxes, f.labels, f.scores, encode_masks(m)))
        out[key] = masked
    return out


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=100)
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--height", type=int, default=360)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    gt, pred = synthetic(args.clips, args.frames)
    scale = np.array([args.width, args.height, args.width, args.height]) / 640.0  # the set lies in a 640-pixel square
    gt = {k: [FrameBoxes(f.frame, f.boxes * scale, f.labels) for f in v] for k, v in gt.items()}
    pred = {k: [FrameBoxes(f.frame, f.boxes * scale, f.labels, f.scores) for f in v] for k, v in pred.items()}
    gt, pred = with_masks(gt, args.height, args.width), with_masks(pred, args.height, args.width)
    encoder = ExactMatchEncoder()
    frames = sum(len(v) for v in gt.values())
    print(f"{args.clips} clips, {frames} GT frames, {args.height}x{args.width}")
    for kind in ("box", "mask"):
        t = best(lambda: evaluate_grounding(gt, pred, encoder, iou_kind=kind), args.repeats)
        print(f"{kind + ' AP50 + mIoU + recall':<32} {t:8.3f} s   {1e3 * t / args.clips:8.2f} ms/clip")
    images = []
    for key, frames_gt in gt.items():
        by_frame = {f.frame: f for f in pred.get(key, [])}
        for f in frames_gt:
            p = by_frame.get(f.frame)
            images.append(GCGImage(f.masks, f.labels, p.masks if p else [], p.labels if p else []))
    t = best(lambda: gcg_mask_sums(images, encoder), args.repeats)
    print(f"{'GCG mask mIoU + recall':<32} {t:8.3f} s   {1e3 * t / args.clips:8.2f} ms/clip")
    key = next(iter(gt))
    one_gt = [f for f in gt[key] if f.masks]
    truth = np.stack([decode_masks(f.masks[:1])[0] for f in one_gt])
    guess = np.roll(truth, 3, axis=2)
    t = best(lambda: j_and_f(truth, guess), args.repeats)
    print(f"{f'J&F, one object, {len(truth)} frames':<32} {t:8.3f} s   {1e3 * t / len(truth):8.2f} ms/frame")


if __name__ == "__main__":
    main()
